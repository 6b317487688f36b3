"""Retention: ``purge_traces`` deletes old runs' events and spans, and nothing else."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from conversations.management.retention import traces_purge
from conversations.models import AgentState, Message, Run, RunEvent, Span, Thread, TraceBlob

pytestmark = pytest.mark.django_db


def _run(
    thread: Thread,
    run_id: str,
    *,
    days_old: float,
    status: str = "succeeded",
    events: int = 3,
    spans: int = 2,
) -> Run:
    run = Run.objects.create(id=run_id, thread=thread, status=status)
    created = timezone.now() - dt.timedelta(days=days_old)
    Run.objects.filter(pk=run_id).update(created_at=created)
    RunEvent.objects.bulk_create(
        [RunEvent(run=run, seq=i + 1, type="text_delta", payload={}) for i in range(events)]
    )
    Span.objects.bulk_create(
        [
            Span(
                trace_id=run_id.ljust(32, "0")[:32],
                span_id=f"{i:016x}",
                run=run,
                kind="run",
                name="s",
                started_at=created,
            )
            for i in range(spans)
        ]
    )
    Message.objects.create(
        thread=thread,
        position=Message.objects.filter(thread=thread).count(),
        message_id=f"m-{run_id}",
        kind="text",
        content="kept",
        run=run,
        created_at=created,
    )
    return run


@pytest.fixture
def runs() -> dict[str, Run]:
    thread = Thread.objects.create(thread_id="retention")
    AgentState.objects.create(thread=thread, agent_name="default", state={"kept": True})
    return {
        "old": _run(thread, "old", days_old=40),
        "older": _run(thread, "older", days_old=400, status="failed", events=7, spans=5),
        "recent": _run(thread, "recent", days_old=2),
        "old-running": _run(thread, "old-running", days_old=50, status="running"),
    }


def _left(run_id: str) -> tuple[int, int]:
    return (
        RunEvent.objects.filter(run_id=run_id).count(),
        Span.objects.filter(run_id=run_id).count(),
    )


def test_old_finished_runs_lose_their_events_and_spans_only(runs: dict[str, Run]) -> None:
    result = traces_purge(older_than=dt.timedelta(days=30), batch_size=2)

    assert (result.run_events, result.spans) == (10, 7)
    assert _left("old") == (0, 0) and _left("older") == (0, 0)
    assert _left("recent") == (3, 2)
    assert _left("old-running") == (3, 2)  # a run in progress is never touched
    # The conversation stays: runs, messages, states.
    assert Run.objects.count() == 4
    assert Message.objects.count() == 4
    assert AgentState.objects.count() == 1


def test_a_dry_run_counts_and_deletes_nothing(runs: dict[str, Run]) -> None:
    result = traces_purge(older_than=dt.timedelta(days=30), dry_run=True)

    assert (result.runs, result.run_events, result.spans) == (2, 10, 7)
    assert RunEvent.objects.count() == 16 and Span.objects.count() == 11


def test_content_blobs_go_once_no_kept_run_can_use_them() -> None:
    now = timezone.now()
    for name, days_old in (("stale", 31), ("used-lately", 29), ("used-today", 0)):
        used = now - dt.timedelta(days=days_old)
        TraceBlob.objects.create(sha256=name.ljust(64, "0"), content=[name], last_used_at=used)

    counted = traces_purge(older_than=dt.timedelta(days=30), dry_run=True, now=now)
    result = traces_purge(older_than=dt.timedelta(days=30), now=now)

    assert (counted.blobs, result.blobs) == (1, 1)
    assert sorted(b.content[0] for b in TraceBlob.objects.all()) == ["used-lately", "used-today"]


def test_many_runs_are_walked_in_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    from conversations.management import retention

    monkeypatch.setattr(retention, "RUNS_PER_STEP", 3)
    thread = Thread.objects.create(thread_id="many")
    for i in range(10):
        _run(thread, f"run-{i}", days_old=60 + i, events=2, spans=1)

    result = traces_purge(older_than=dt.timedelta(days=30), batch_size=1)

    assert (result.runs, result.run_events, result.spans) == (10, 20, 10)
    assert RunEvent.objects.count() == 0 and Span.objects.count() == 0


def test_the_command_uses_the_setting_by_default(runs: dict[str, Run]) -> None:
    out = StringIO()
    with override_settings(COPILOT_RUNTIME={"TRACE_RETENTION_DAYS": 100}):
        call_command("purge_traces", stdout=out)

    assert (
        "Deleted 7 run event(s) and 5 span(s) of 1 run(s) older than 100 day(s), and 0 unused "
        "content blob(s)." in out.getvalue()
    )
    assert _left("older") == (0, 0) and _left("old") == (3, 2)


def test_the_command_takes_an_age_and_a_dry_run(runs: dict[str, Run]) -> None:
    out = StringIO()
    call_command("purge_traces", "--older-than-days", "1", "--dry-run", stdout=out)

    assert "Would delete 13 run event(s) and 9 span(s) of 3 run(s)" in out.getvalue()
    assert RunEvent.objects.count() == 16


def test_the_command_with_retention_switched_off_purges_nothing(runs: dict[str, Run]) -> None:
    out = StringIO()
    with override_settings(COPILOT_RUNTIME={"TRACE_RETENTION_DAYS": 0}):
        call_command("purge_traces", stdout=out)

    assert "nothing is purged" in out.getvalue()
    assert RunEvent.objects.count() == 16


@pytest.mark.parametrize("arguments", [["--older-than-days", "-1"], ["--batch-size", "0"]])
def test_the_command_refuses_bad_arguments(arguments: list[str]) -> None:
    with pytest.raises(CommandError):
        call_command("purge_traces", *arguments)


def test_a_pending_interrupts_log_is_kept() -> None:
    waiting = Thread.objects.create(thread_id="waiting", status="interrupted")
    answered = Thread.objects.create(thread_id="answered", status="idle")
    _run(waiting, "pending-interrupt", days_old=90, status="interrupted")
    _run(answered, "old-interrupt", days_old=90, status="interrupted")

    traces_purge(older_than=dt.timedelta(days=30), batch_size=10)

    assert _left("pending-interrupt") == (3, 2)
    assert _left("old-interrupt") == (0, 0)
