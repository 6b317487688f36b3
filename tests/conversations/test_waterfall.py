"""The waterfall layout and the state diff of the inspector (pure functions)."""

from __future__ import annotations

import datetime as dt

from conversations.admin.state_diff import state_changes
from conversations.admin.waterfall import SpanInput, waterfall_layout

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def span(span_id: str, parent: str, start: float, end: float | None, **fields: object) -> SpanInput:
    return SpanInput(
        span_id=span_id,
        parent_span_id=parent,
        kind=str(fields.get("kind", "tool")),
        name=span_id,
        started_at=T0 + dt.timedelta(seconds=start),
        ended_at=T0 + dt.timedelta(seconds=end) if end is not None else None,
        is_error=fields.get("is_error"),  # type: ignore[arg-type]
        is_complete=bool(fields.get("is_complete", True)),
    )


def test_rows_follow_the_tree_depth_first_by_start_time() -> None:
    layout = waterfall_layout(
        [
            span("tool-late", "root", 6, 8),
            span("gen", "root", 1, 5),
            span("root", "", 0, 10, kind="run"),
            span("reasoning", "gen", 2, 3),
        ]
    )

    assert [(r.span.span_id, r.depth) for r in layout.rows] == [
        ("root", 0),
        ("gen", 1),
        ("reasoning", 2),
        ("tool-late", 1),
    ]
    assert [r.indent_em for r in layout.rows] == ["0.0", "1.2", "2.4", "1.2"]


def test_bars_are_placed_to_scale() -> None:
    layout = waterfall_layout([span("root", "", 0, 10), span("a", "root", 2.5, 5)])

    assert layout.total_ms == 10_000
    root, a = layout.rows
    assert (root.offset_percent, root.width_percent) == ("0.000", "100.000")
    assert (a.offset_percent, a.width_percent) == ("25.000", "25.000")
    assert a.duration_ms == 2500
    assert layout.ticks == [
        ("0.000", "0 ms"),
        ("25.000", "2.50 s"),
        ("50.000", "5.00 s"),
        ("75.000", "7.50 s"),
        ("100.000", "10.00 s"),
    ]


def test_a_span_of_no_duration_stays_visible_and_inside_the_axis() -> None:
    layout = waterfall_layout([span("root", "", 0, 1), span("point", "root", 1, 1)])

    point = layout.rows[1]
    assert point.width_percent == "0.400"
    assert point.offset_percent == "99.600"


def test_an_open_span_runs_to_the_end_of_the_axis() -> None:
    layout = waterfall_layout(
        [span("root", "", 0, 4), span("open", "root", 3, None, is_complete=False)]
    )

    open_row = layout.rows[1]
    assert open_row.duration_ms is None
    assert (open_row.offset_percent, open_row.width_percent) == ("75.000", "25.000")
    assert open_row.is_incomplete


def test_orphans_and_cycles_are_shown_once_as_roots() -> None:
    layout = waterfall_layout(
        [span("a", "b", 0, 1), span("b", "a", 0, 1), span("orphan", "gone", 0.5, 1)]
    )

    assert sorted(r.span.span_id for r in layout.rows) == ["a", "b", "orphan"]


def test_no_spans_no_rows() -> None:
    assert waterfall_layout([]).rows == []


def test_state_changes_list_added_removed_and_changed_keys() -> None:
    changes = state_changes(
        {"kept": 1, "gone": "x", "moved": [1]}, {"kept": 1, "moved": [1, 2], "new": {"a": 1}}
    )

    assert [(c.key, c.change) for c in changes] == [
        ("gone", "removed"),
        ("moved", "changed"),
        ("new", "added"),
    ]
    assert changes[1].before == "[\n  1\n]"
    assert changes[2].after == '{\n  "a": 1\n}'


def test_the_first_state_adds_every_key() -> None:
    assert [c.change for c in state_changes(None, {"a": 1, "b": 2})] == ["added", "added"]
