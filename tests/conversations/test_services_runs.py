"""Runs: one at a time per thread, moved through their statuses, their progress recorded."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.db import IntegrityError
from django.utils import timezone

from conversations.models import (
    AgentState,
    Message,
    Run,
    RunEvent,
    RunStatus,
    Thread,
    ThreadStatus,
)
from conversations.services.messages import OutputMessage
from conversations.services.runs import (
    ACTIVE_STATUSES,
    LoggedEvent,
    Usage,
    run_create,
    run_finish,
    run_heartbeats,
    run_mark_running,
    run_record_progress,
    run_request_cancel,
)
from tests.conversations.factories import thread_create

pytestmark = pytest.mark.django_db


def started_run(thread: Thread | None = None, *, run_id: str | None = None) -> Run:
    return run_create(
        thread=thread or thread_create(),
        agent_name="default",
        protocol="graphql",
        request_type="Chat",
        previous_run_id=None,
        run_id=run_id,
    )


# --- creating and starting --------------------------------------------------------------------


def test_run_create_makes_a_pending_run_and_marks_the_thread_running() -> None:
    thread = thread_create()

    run = run_create(
        thread=thread,
        agent_name="default",
        protocol="graphql",
        request_type="Chat",
        previous_run_id=None,
    )

    run.refresh_from_db()
    thread.refresh_from_db()
    assert run.status == RunStatus.PENDING
    assert uuid.UUID(run.id)
    assert run.previous_run_id == ""
    assert thread.status == ThreadStatus.RUNNING


def test_run_create_keeps_a_client_run_id_and_the_previous_run() -> None:
    run = run_create(
        thread=thread_create(),
        agent_name="default",
        protocol="agui",
        request_type="Chat",
        previous_run_id="earlier",
        run_id="client-run-1",
    )

    run.refresh_from_db()
    assert (run.id, run.protocol, run.previous_run_id) == ("client-run-1", "agui", "earlier")


def test_run_mark_running_moves_a_pending_run_once() -> None:
    run = started_run()

    assert run_mark_running(run_id=run.id, model="gpt-test") is True
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING
    assert run.model == "gpt-test"
    assert run.started_at is not None
    assert run.heartbeat_at is not None
    first_start = run.started_at

    assert run_mark_running(run_id=run.id, model="other") is False
    run.refresh_from_db()
    assert run.started_at == first_start
    assert run.model == "gpt-test"


def test_run_mark_running_leaves_a_stopped_run_alone() -> None:
    run = started_run()
    run_finish(run_id=run.id, status=RunStatus.CANCELLED, usage=Usage())

    assert run_mark_running(run_id=run.id, model="gpt-test") is False
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED


def test_run_mark_running_of_an_unknown_run_is_false() -> None:
    assert run_mark_running(run_id="no-such-run", model="m") is False


# --- finishing --------------------------------------------------------------------------------


def test_run_finish_records_status_usage_and_frees_the_thread() -> None:
    run = started_run()
    run_mark_running(run_id=run.id, model="m")

    run_finish(
        run_id=run.id,
        status=RunStatus.SUCCEEDED,
        usage=Usage(input_tokens=10, output_tokens=20, cached_input_tokens=3, reasoning_tokens=4),
    )

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert (run.input_tokens, run.output_tokens, run.cached_input_tokens, run.reasoning_tokens) == (
        10,
        20,
        3,
        4,
    )
    assert run.finished_at is not None
    assert run.duration_ms is not None and run.duration_ms >= 0
    assert (run.error_code, run.error_details) == ("", None)
    run.thread.refresh_from_db()
    assert run.thread.status == ThreadStatus.IDLE
    assert not Run.objects.filter(thread=run.thread, status__in=ACTIVE_STATUSES).exists()


def test_run_finish_adds_to_usage_already_counted() -> None:
    run = started_run()
    Run.objects.filter(pk=run.pk).update(input_tokens=5, output_tokens=7)

    run_finish(
        run_id=run.id,
        status=RunStatus.SUCCEEDED,
        usage=Usage(input_tokens=10, output_tokens=1),
    )

    run.refresh_from_db()
    assert (run.input_tokens, run.output_tokens) == (15, 8)


def test_run_finish_records_a_failure() -> None:
    run = started_run()

    run_finish(
        run_id=run.id,
        status=RunStatus.FAILED,
        usage=Usage(),
        error_code="UPSTREAM_ERROR",
        error_details={"message": "502 from the model"},
    )

    run.refresh_from_db()
    assert (run.status, run.error_code, run.error_details) == (
        RunStatus.FAILED,
        "UPSTREAM_ERROR",
        {"message": "502 from the model"},
    )
    run.thread.refresh_from_db()
    assert run.thread.status == ThreadStatus.IDLE


def test_an_interrupted_run_leaves_the_thread_interrupted() -> None:
    run = started_run()

    run_finish(run_id=run.id, status=RunStatus.INTERRUPTED, usage=Usage())

    run.thread.refresh_from_db()
    assert run.thread.status == ThreadStatus.INTERRUPTED
    assert not Run.objects.filter(thread=run.thread, status__in=ACTIVE_STATUSES).exists()


# --- progress ---------------------------------------------------------------------------------


def test_run_record_progress_writes_events_messages_and_states() -> None:
    run = started_run()
    first_token_at = timezone.now() - dt.timedelta(seconds=1)

    run_record_progress(
        run_id=run.id,
        events=[
            LoggedEvent(seq=1, type="RUN_STARTED", payload={}),
            LoggedEvent(seq=2, type="TEXT_MESSAGE_START", payload={"messageId": "a1"}),
        ],
        messages=[OutputMessage(message_id="a1", kind="text", role="assistant", content="Hi")],
        agent_states=[{"agent_name": "default", "state": {"step": 1}, "running": True}],
        first_token_at=first_token_at,
    )
    run_record_progress(
        run_id=run.id,
        events=[LoggedEvent(seq=3, type="RUN_FINISHED", payload={"ok": True})],
        messages=[OutputMessage(message_id="a2", kind="text", role="assistant", content="Bye")],
        agent_states=[{"agent_name": "default", "state": {"step": 2}}],
    )

    assert list(
        RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", "type", "payload")
    ) == [
        (1, "RUN_STARTED", {}),
        (2, "TEXT_MESSAGE_START", {"messageId": "a1"}),
        (3, "RUN_FINISHED", {"ok": True}),
    ]
    assert list(
        Message.objects.filter(thread=run.thread)
        .order_by("position")
        .values_list("position", "message_id", "content", "run_id")
    ) == [(0, "a1", "Hi", run.id), (1, "a2", "Bye", run.id)]
    states = list(AgentState.objects.filter(thread=run.thread).order_by("id"))
    assert [(s.state, s.running) for s in states] == [({"step": 1}, True), ({"step": 2}, False)]
    run.refresh_from_db()
    assert run.first_token_at == first_token_at


def test_run_heartbeats_renew_and_report_the_runs_asked_to_stop() -> None:
    first, second = started_run(), started_run()
    Run.objects.filter(pk__in=[first.pk, second.pk]).update(heartbeat_at=None)

    assert run_heartbeats(run_ids=[first.id, second.id]) == set()
    assert Run.objects.filter(pk__in=[first.pk, second.pk], heartbeat_at=None).count() == 0

    assert run_request_cancel(run_id=second.id) is True
    assert run_heartbeats(run_ids=[first.id, second.id]) == {second.id}


def test_run_record_progress_is_all_or_nothing() -> None:
    run = started_run()
    run_record_progress(
        run_id=run.id,
        events=[LoggedEvent(seq=1, type="RUN_STARTED", payload={})],
        messages=[],
        agent_states=[],
    )

    with pytest.raises(IntegrityError):
        run_record_progress(
            run_id=run.id,
            events=[
                LoggedEvent(seq=2, type="TEXT_MESSAGE_START", payload={}),
                LoggedEvent(seq=1, type="RUN_STARTED", payload={}),
            ],
            messages=[OutputMessage(message_id="a1", kind="text")],
            agent_states=[{"agent_name": "default", "state": {"x": 1}}],
        )

    assert list(RunEvent.objects.filter(run=run).values_list("seq", flat=True)) == [1]
    assert not Message.objects.filter(thread=run.thread).exists()
    assert not AgentState.objects.filter(thread=run.thread).exists()
