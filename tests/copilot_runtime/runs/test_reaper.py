"""Ending runs whose executor died: ``runs_reap_stale`` and the places that call it.

A running run whose heartbeat is older than ``RUN_STALE_SECONDS`` is failed with
``WORKER_LOST``; its log gets ``run_error`` and ``run_finished`` with the next seqs. Fresh and
finished runs are never touched, and a stale run does not keep its thread busy.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings
from django.utils import timezone

from conversations.models import Run, RunEvent, RunStatus, Thread, ThreadStatus
from conversations.services.runs import ThreadBusy
from copilot_runtime.events import RunError, RunFinished, TextDelta
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.runs import relay
from copilot_runtime.runs.executor import watch_remote
from copilot_runtime.runs.reaper import WORKER_LOST, runs_reap_stale
from copilot_runtime.runs.start import turn_prepare
from copilot_runtime.tasks import reap_stale_runs

pytestmark = pytest.mark.django_db(transaction=True)

STALE_SECONDS = 3.0


@pytest.fixture(autouse=True)
def short_stale_time() -> Iterator[None]:
    with override_settings(
        COPILOT_RUNTIME={"RUN_STALE_SECONDS": STALE_SECONDS, "EXECUTOR": "inline"},
        CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
    ):
        yield


def make_run(
    run_id: str,
    *,
    status: str = RunStatus.RUNNING,
    heartbeat_age: float | None,
    logged: int = 3,
    thread_id: str | None = None,
) -> Run:
    thread = Thread.objects.create(
        thread_id=thread_id or f"thread-{run_id}", status=ThreadStatus.RUNNING
    )
    heartbeat = None
    if heartbeat_age is not None:
        heartbeat = timezone.now() - dt.timedelta(seconds=heartbeat_age)
    run = Run.objects.create(id=run_id, thread=thread, status=status, heartbeat_at=heartbeat)
    RunEvent.objects.bulk_create(
        [
            RunEvent(run=run, seq=1, type="text_start", payload={"message_id": "m1"}),
            *[
                RunEvent(
                    run=run, seq=seq, type="text_delta", payload={"message_id": "m1", "delta": "x"}
                )
                for seq in range(2, logged + 1)
            ],
        ]
    )
    return run


def log_of(run_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    return [
        (e.seq, e.type, e.payload) for e in RunEvent.objects.filter(run_id=run_id).order_by("seq")
    ]


def test_a_stale_running_run_is_failed_with_worker_lost_and_its_log_closed() -> None:
    make_run("stale", heartbeat_age=STALE_SECONDS + 5)
    before = log_of("stale")

    assert runs_reap_stale() == 1

    run = Run.objects.select_related("thread").get(pk="stale")
    assert run.status == RunStatus.FAILED
    assert run.error_code == WORKER_LOST
    assert run.finished_at is not None
    assert run.thread.status == ThreadStatus.IDLE
    log = log_of("stale")
    assert log[:3] == before
    (error_seq, error_type, error), (end_seq, end_type, end) = log[3:]
    assert (error_seq, end_seq) == (4, 5)
    assert error_type == RunError.type and error["code"] == WORKER_LOST and error["message"]
    assert (end_type, end) == (RunFinished.type, {"status": "failed"})
    # Reaping again changes nothing.
    assert runs_reap_stale() == 0
    assert len(log_of("stale")) == 5


def test_a_running_run_that_never_beat_is_stale() -> None:
    make_run("never-beat", heartbeat_age=None)

    assert runs_reap_stale() == 1
    assert Run.objects.get(pk="never-beat").error_code == WORKER_LOST


@pytest.mark.parametrize(
    ("status", "heartbeat_age"),
    [
        pytest.param(RunStatus.RUNNING, 0.0, id="fresh-running"),
        pytest.param(RunStatus.RUNNING, STALE_SECONDS - 1, id="running-not-yet-stale"),
        pytest.param(RunStatus.SUCCEEDED, 60.0, id="succeeded"),
        pytest.param(RunStatus.CANCELLED, 60.0, id="cancelled"),
        pytest.param(RunStatus.FAILED, 60.0, id="failed"),
    ],
)
def test_fresh_and_finished_runs_are_untouched(status: str, heartbeat_age: float) -> None:
    run = make_run("kept", status=status, heartbeat_age=heartbeat_age)
    before = log_of("kept")

    assert runs_reap_stale() == 0

    again = Run.objects.get(pk="kept")
    assert (again.status, again.error_code, again.finished_at) == (status, "", run.finished_at)
    assert log_of("kept") == before


def test_only_the_listed_runs_are_reaped() -> None:
    make_run("listed", heartbeat_age=60)
    make_run("unlisted", heartbeat_age=60)

    assert runs_reap_stale(run_ids=["listed"]) == 1

    assert Run.objects.get(pk="listed").status == RunStatus.FAILED
    assert Run.objects.get(pk="unlisted").status == RunStatus.RUNNING


def test_the_periodic_celery_task_reaps_stale_runs() -> None:
    make_run("periodic", heartbeat_age=60)

    assert reap_stale_runs.apply().get() == 1
    assert Run.objects.get(pk="periodic").status == RunStatus.FAILED


def _request(thread_id: str, message_id: str) -> Any:
    return parse_generate_input(
        {
            "threadId": thread_id,
            "frontend": {"actions": []},
            "messages": [
                {
                    "id": message_id,
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "textMessage": {"content": "Hello again", "role": "user"},
                }
            ],
            "metadata": {"requestType": "Chat"},
        },
        {},
    )


def test_a_thread_whose_only_running_run_is_stale_accepts_a_new_turn() -> None:
    make_run("dead", heartbeat_age=60, thread_id="busy-thread")

    prepared = async_to_sync(turn_prepare)(
        user=AnonymousUser(), request=_request("busy-thread", "u2"), protocol="graphql"
    )

    assert Run.objects.get(pk="dead").status == RunStatus.FAILED
    assert Run.objects.get(pk=prepared.run_id).status == RunStatus.PENDING


def test_a_thread_with_a_live_running_run_is_still_busy() -> None:
    make_run("alive", heartbeat_age=0, thread_id="live-thread")

    with pytest.raises(ThreadBusy):
        async_to_sync(turn_prepare)(
            user=AnonymousUser(), request=_request("live-thread", "u2"), protocol="graphql"
        )
    assert Run.objects.get(pk="alive").status == RunStatus.RUNNING


async def test_a_follower_of_a_run_whose_executor_died_ends_with_worker_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The web process's follower checks the run when nothing arrives: it does not hang."""
    monkeypatch.setattr(relay, "IDLE_CHECK_SECONDS", 0.1)
    await sync_to_async(make_run)("orphan", heartbeat_age=STALE_SECONDS + 1)

    events, stop_following, _reply_to = await watch_remote("orphan")
    received = []
    try:
        while (event := await asyncio.wait_for(events.get(), 10)) is not None:
            received.append(event)
    finally:
        stop_following()

    assert [type(event) for event in received] == [
        type(received[0]),
        TextDelta,
        TextDelta,
        RunError,
        RunFinished,
    ]
    assert received[-2].code == WORKER_LOST
    assert received[-1].status == "failed"
    run = await Run.objects.aget(pk="orphan")
    assert (run.status, run.error_code) == (RunStatus.FAILED, WORKER_LOST)


# --- the durable-run gaps: partial output, runs no worker started, slow workers ---------------


def test_a_lost_runs_partial_answer_is_stored_failed_like_a_cancelled_runs() -> None:
    from conversations.models import Message

    make_run("lost-partial", heartbeat_age=STALE_SECONDS + 5, logged=4)  # "xxx" of message m1

    assert runs_reap_stale() == 1

    (message,) = Message.objects.filter(thread__thread_id="thread-lost-partial")
    assert (message.message_id, message.content, message.status) == ("m1", "xxx", "failed")
    assert "stopped responding" in message.status_reason
    assert message.run_id == "lost-partial"


def test_a_pending_run_no_worker_started_is_failed_with_run_not_started() -> None:
    from copilot_runtime.runs.reaper import RUN_NOT_STARTED

    with override_settings(COPILOT_RUNTIME={"PENDING_TIMEOUT_SECONDS": 5.0, "EXECUTOR": "celery"}):
        make_run("waiting-fresh", status=RunStatus.PENDING, heartbeat_age=None, logged=0)
        make_run("waiting-long", status=RunStatus.PENDING, heartbeat_age=None, logged=0)
        Run.objects.filter(pk="waiting-long").update(
            created_at=timezone.now() - dt.timedelta(seconds=6)
        )

        assert runs_reap_stale() == 1

    fresh, old = Run.objects.get(pk="waiting-fresh"), Run.objects.get(pk="waiting-long")
    assert fresh.status == RunStatus.PENDING
    assert (old.status, old.error_code) == (RunStatus.FAILED, RUN_NOT_STARTED)
    types = [entry[1] for entry in log_of("waiting-long")]
    assert types[-2:] == [RunError.type, RunFinished.type]


def test_a_worker_that_missed_fewer_than_three_heartbeats_is_not_dead() -> None:
    # The defaults: a 2 s heartbeat, dead after 6.5 s without one (a GC pause is not a death).
    with override_settings(COPILOT_RUNTIME={"EXECUTOR": "inline"}):
        make_run("paused", heartbeat_age=5.0)
        make_run("gone", heartbeat_age=7.0)

        assert runs_reap_stale() == 1

    assert Run.objects.get(pk="paused").status == RunStatus.RUNNING
    assert Run.objects.get(pk="gone").error_code == WORKER_LOST


def test_the_reap_runs_command_reaps() -> None:
    from io import StringIO

    from django.core.management import call_command

    make_run("for-the-command", heartbeat_age=STALE_SECONDS + 5)
    out = StringIO()
    call_command("reap_runs", stdout=out)

    assert out.getvalue().strip() == "Reaped 1 run(s)."
    assert Run.objects.get(pk="for-the-command").status == RunStatus.FAILED
