"""A run's spans laid out as a waterfall: rows in tree order, bars placed on one time axis.

Pure: the view gives span rows, the template draws each bar with the percentages computed
here (pre-formatted, so no locale can turn a dot into a comma inside a style attribute).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# A bar narrower than this (in % of the axis) is drawn at this width, so it stays visible.
MIN_BAR_PERCENT = 0.4


@dataclass(frozen=True, slots=True)
class SpanInput:
    span_id: str
    parent_span_id: str
    kind: str
    name: str
    started_at: dt.datetime
    ended_at: dt.datetime | None
    is_error: bool | None
    is_complete: bool
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WaterfallRow:
    span: SpanInput
    depth: int
    offset_percent: str
    width_percent: str
    duration_ms: float | None
    indent_em: str

    @property
    def is_error(self) -> bool:
        return bool(self.span.is_error)

    @property
    def is_incomplete(self) -> bool:
        return not self.span.is_complete


@dataclass(frozen=True, slots=True)
class Waterfall:
    rows: list[WaterfallRow]
    total_ms: float
    ticks: list[tuple[str, str]]  # (left %, label)


def _percent(value: float) -> str:
    return f"{max(0.0, min(100.0, value)):.3f}"


def _label(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.0f} ms"


def _tree_order(spans: list[SpanInput]) -> list[tuple[SpanInput, int]]:
    """Depth first, children by start time; a span whose parent is not shown is a root."""
    ids = {span.span_id for span in spans}
    children: dict[str, list[SpanInput]] = {}
    roots: list[SpanInput] = []
    for span in sorted(spans, key=lambda s: (s.started_at, s.span_id)):
        if (
            span.parent_span_id
            and span.parent_span_id in ids
            and span.parent_span_id != span.span_id
        ):
            children.setdefault(span.parent_span_id, []).append(span)
        else:
            roots.append(span)
    ordered: list[tuple[SpanInput, int]] = []
    seen: set[str] = set()

    def walk(start: SpanInput) -> None:
        stack = [(start, 0)]
        while stack:
            span, depth = stack.pop()
            if span.span_id in seen:  # a cycle in bad data must not loop forever
                continue
            seen.add(span.span_id)
            ordered.append((span, depth))
            stack.extend((child, depth + 1) for child in reversed(children.get(span.span_id, [])))

    for root in roots:
        walk(root)
    # Spans only reachable through a cycle of parents (bad data) are still shown, as roots.
    for span in sorted(spans, key=lambda s: (s.started_at, s.span_id)):
        if span.span_id not in seen:
            walk(span)
    return ordered


def waterfall_layout(
    spans: Iterable[SpanInput],
    *,
    now: dt.datetime | None = None,
    axis: tuple[dt.datetime, dt.datetime] | None = None,
) -> Waterfall:
    """``axis`` (start, end) fixes the time axis, so that every page of a long run's spans is
    drawn on the run's whole timeline; by default it spans the given spans."""
    spans = list(spans)
    if not spans:
        return Waterfall(rows=[], total_ms=0.0, ticks=[])
    start = min(span.started_at for span in spans)
    open_end = now or max(span.started_at for span in spans)
    end = max((span.ended_at or open_end) for span in spans)
    if axis is not None:
        start, end = min(start, axis[0]), max(end, axis[1])
    total_ms = max((end - start).total_seconds() * 1000, 0.0)
    scale = 100.0 / total_ms if total_ms > 0 else 0.0
    rows = []
    for span, depth in _tree_order(spans):
        offset_ms = (span.started_at - start).total_seconds() * 1000
        span_end = span.ended_at or end
        duration_ms = (span_end - span.started_at).total_seconds() * 1000
        width = duration_ms * scale if total_ms > 0 else 100.0
        offset = offset_ms * scale
        width = max(width, MIN_BAR_PERCENT)
        if offset + width > 100.0:
            offset = max(0.0, 100.0 - width)
        rows.append(
            WaterfallRow(
                span=span,
                depth=depth,
                offset_percent=_percent(offset),
                width_percent=_percent(width),
                duration_ms=duration_ms if span.ended_at is not None else None,
                indent_em=f"{depth * 1.2:.1f}",
            )
        )
    ticks = [(_percent(25.0 * i), _label(total_ms * i / 4)) for i in range(5)]
    return Waterfall(rows=rows, total_ms=total_ms, ticks=ticks)
