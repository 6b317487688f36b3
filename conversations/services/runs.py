"""Runs: created for a turn, moved through their statuses, their event log appended."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Case, CharField, Exists, F, Value, When
from django.utils import timezone

from conversations.models import (
    ACTIVE_STATUSES,
    AgentState,
    Run,
    RunEvent,
    RunStatus,
    Thread,
    ThreadStatus,
)
from conversations.services.messages import OutputMessage, messages_store_output
from copilot_runtime.errors import CopilotKitError, ErrorCode

# A run whose executor stopped renewing its heartbeat (killed, crashed, its machine lost), as the
# reaper ends it (copilot_runtime/runs/reaper.py); the admin shows it as interrupted.
WORKER_LOST_CODE = "WORKER_LOST"
# Meta events by which an agent pauses for the user (human in the loop, see agents/interrupts.py).
INTERRUPT_META_EVENT_NAMES = ("LangGraphInterruptEvent", "CopilotKitLangGraphInterruptEvent")


class ThreadBusy(CopilotKitError):
    def __init__(self, thread_id: str) -> None:
        super().__init__(
            f"Thread '{thread_id}' is still answering a previous request; wait for it to "
            "finish or stop it first.",
            code=ErrorCode.THREAD_BUSY,
        )


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass(slots=True)
class RunOutcome:
    status: str
    usage: Usage
    error_code: str = ""
    error_details: dict[str, Any] | None = None
    limit_trips: list[dict[str, Any]] | None = None
    # The model the run used, recorded with its end when it was not recorded at its start.
    model: str = ""


@dataclass(slots=True)
class LoggedEvent:
    seq: int
    type: str
    payload: dict[str, Any]


def new_run_id() -> str:
    return str(uuid.uuid4())


def run_create(
    *,
    thread: Thread,
    agent_name: str,
    protocol: str,
    request_type: str,
    previous_run_id: str | None,
    run_id: str | None = None,
    executor: str = "",
) -> Run:
    run = Run.objects.create(
        id=run_id or new_run_id(),
        thread=thread,
        agent_name=agent_name,
        protocol=protocol,
        executor=executor,
        request_type=request_type,
        previous_run_id=previous_run_id or "",
    )
    Thread.objects.filter(pk=thread.pk).update(
        status=ThreadStatus.RUNNING, updated_at=timezone.now()
    )
    return run


def run_mark_running(*, run_id: str, model: str = "") -> bool:
    """pending -> running, once: False when the run is not pending (already started by an
    earlier delivery of the same task, or stopped before it started)."""
    now = timezone.now()
    return bool(
        Run.objects.filter(pk=run_id, status=RunStatus.PENDING).update(
            status=RunStatus.RUNNING,
            started_at=now,
            heartbeat_at=now,
            model=model,
            attempts=F("attempts") + 1,
        )
    )


def run_record_start(*, run_id: str, started_at: dt.datetime, model: str) -> None:
    """What ``run_mark_running`` records, for a run its executor took without it (a worker's
    first delivery: copilot_runtime/runs/claim_redis.py), with the run's first write: pending ->
    running, its start and model. Once: nothing changes for a run whose start is recorded."""
    fields: dict[str, Any] = {"model": model} if model else {}
    Run.objects.filter(pk=run_id, started_at__isnull=True).update(
        **fields,
        status=_running_if_pending(),
        started_at=started_at,
        heartbeat_at=started_at,
        attempts=F("attempts") + 1,
    )


def run_heartbeats(*, run_ids: list[str]) -> set[str]:
    """Record that the process executing these runs is alive; the ids whose stop was
    requested. A run whose start is not recorded yet (see ``run_record_start``) is running
    from now."""
    now = timezone.now()
    Run.objects.filter(pk__in=run_ids, started_at__isnull=True).update(
        status=_running_if_pending(),
        started_at=now,
        attempts=F("attempts") + 1,
    )
    Run.objects.filter(pk__in=run_ids).update(heartbeat_at=now)
    return set(
        Run.objects.filter(pk__in=run_ids, cancel_requested=True).values_list("pk", flat=True)
    )


def run_request_cancel(*, run_id: str) -> bool:
    """Ask the process executing the run to stop it. False when the run already ended."""
    return bool(
        Run.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES).update(cancel_requested=True)
    )


@transaction.atomic
def runs_log_batches(
    *,
    batches: Sequence[tuple[str, list[LoggedEvent]]],
    first_tokens: Sequence[tuple[str, dt.datetime]] = (),
) -> None:
    """The next log entries of several runs at once, and the first tokens' times given, all or
    none (their mid-run batches, written together by the event loop that executes them:
    copilot_runtime/runs/log_writer.py)."""
    RunEvent.objects.bulk_create(
        [
            RunEvent(run_id=run_id, seq=e.seq, type=e.type, payload=e.payload)
            for run_id, events in batches
            for e in events
        ]
    )
    for run_id, first_token_at in first_tokens:
        Run.objects.filter(pk=run_id).update(first_token_at=first_token_at)


@transaction.atomic
def run_record_progress(
    *,
    run_id: str,
    events: list[LoggedEvent],
    messages: list[OutputMessage],
    agent_states: list[dict[str, Any]],
    first_token_at: dt.datetime | None = None,
    outcome: RunOutcome | None = None,
) -> None:
    """One batch of a run's progress: log entries, finished output messages, state snapshots;
    with ``outcome``, the run's end too, in the same transaction as its last events."""
    if events:
        RunEvent.objects.bulk_create(
            [RunEvent(run_id=run_id, seq=e.seq, type=e.type, payload=e.payload) for e in events]
        )
    if messages or agent_states:
        run = Run.objects.only("id", "thread_id").get(pk=run_id)
        if messages:
            messages_store_output(run=run, messages=messages)
        if agent_states:
            AgentState.objects.bulk_create(
                [AgentState(thread_id=run.thread_id, **snapshot) for snapshot in agent_states]
            )
    if first_token_at is not None:
        # The heartbeat is renewed by the executor's watchdog, not by every batch.
        Run.objects.filter(pk=run_id).update(first_token_at=first_token_at)
    if outcome is not None:
        run_finish(
            run_id=run_id,
            status=outcome.status,
            usage=outcome.usage,
            error_code=outcome.error_code,
            error_details=outcome.error_details,
            limit_trips=outcome.limit_trips,
            model=outcome.model,
        )


@transaction.atomic
def run_finish(
    *,
    run_id: str,
    status: str,
    usage: Usage,
    error_code: str = "",
    error_details: dict[str, Any] | None = None,
    limit_trips: list[dict[str, Any]] | None = None,
    model: str = "",
) -> None:
    now = timezone.now()
    extra: dict[str, Any] = {"limit_trips": limit_trips} if limit_trips else {}
    if model:
        extra["model"] = model
    run_status: Any = status
    thread_status: Any = (
        ThreadStatus.INTERRUPTED if status == RunStatus.INTERRUPTED else ThreadStatus.IDLE
    )
    if status == RunStatus.SUCCEEDED:
        # A run whose agent paused for the user (an interrupt in its log) ends interrupted, and
        # so does its thread, until a request answers it; decided in the same statements.
        paused = _interrupt_logged(run_id)
        run_status = _if(paused, RunStatus.INTERRUPTED, status)
        thread_status = _if(paused, ThreadStatus.INTERRUPTED, ThreadStatus.IDLE)
    Run.objects.filter(pk=run_id).update(
        **extra,
        status=run_status,
        error_code=error_code,
        error_details=error_details,
        finished_at=now,
        input_tokens=F("input_tokens") + usage.input_tokens,
        output_tokens=F("output_tokens") + usage.output_tokens,
        cached_input_tokens=F("cached_input_tokens") + usage.cached_input_tokens,
        reasoning_tokens=F("reasoning_tokens") + usage.reasoning_tokens,
    )
    Thread.objects.filter(runs__id=run_id).update(status=thread_status, updated_at=now)


def _interrupt_logged(run_id: str) -> Exists:
    return Exists(
        RunEvent.objects.filter(
            run_id=run_id, type="meta_event", payload__name__in=INTERRUPT_META_EVENT_NAMES
        )
    )


def _running_if_pending() -> Case:
    return Case(
        When(status=RunStatus.PENDING, then=Value(str(RunStatus.RUNNING))),
        default=F("status"),
        output_field=CharField(),
    )


def _if(condition: Exists, then: str, otherwise: str) -> Case:
    return Case(
        When(condition, then=Value(str(then))),
        default=Value(str(otherwise)),
        output_field=CharField(),
    )
