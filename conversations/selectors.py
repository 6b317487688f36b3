"""Selectors: reading conversations for a caller (ownership applied everywhere)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q

from conversations.models import (
    AgentState,
    Message,
    Run,
    RunEvent,
    RunStatus,
    Thread,
    ThreadStatus,
)
from conversations.services.runs import ACTIVE_STATUSES, INTERRUPT_META_EVENT_NAMES, LoggedEvent
from conversations.services.threads import thread_is_visible_to, threads_of_caller
from copilot_runtime.events import MetaEvent, RunError, RunFinished


def thread_get_for_caller(
    *, thread_id: str, user: AbstractBaseUser | AnonymousUser
) -> Thread | None:
    """The caller's thread ``thread_id``; None when the caller has none (another caller's
    thread of that id is not looked at: the same answer)."""
    return threads_of_caller(user).filter(thread_id=thread_id).first()


def threads_for_caller(
    *,
    user: AbstractBaseUser | AnonymousUser,
    agent_name: str | None = None,
    include_archived: bool = False,
    after: tuple[dt.datetime, int] | None = None,
    limit: int,
) -> list[Thread]:
    """The caller's threads, most recently updated first; ``after`` (updated_at, pk) continues
    a page."""
    threads = threads_of_caller(user).order_by("-updated_at", "-pk")
    if agent_name:
        threads = threads.filter(agent_name=agent_name)
    if not include_archived:
        threads = threads.exclude(status=ThreadStatus.ARCHIVED)
    if after is not None:
        updated_at, pk = after
        threads = threads.filter(Q(updated_at__lt=updated_at) | Q(updated_at=updated_at, pk__lt=pk))
    return list(threads[:limit])


def thread_current_messages(*, thread: Thread) -> list[Message]:
    """The thread's current (not superseded) messages in order."""
    return list(Message.objects.filter(thread=thread, superseded=False).order_by("position"))


def agent_state_latest(*, thread: Thread, agent_name: str) -> AgentState | None:
    return AgentState.objects.filter(thread=thread, agent_name=agent_name).order_by("-id").first()


def thread_pending_interrupt(*, thread_pk: int | None) -> list[dict[str, Any]]:
    """The interrupt a thread waits on: the interrupt meta events (their logged payloads) of
    its latest finished run when that run ended ``interrupted``; else an empty list (also for
    no thread: a turn that stores none, a suggestion). By primary key: a client's thread id
    names a thread only together with its owner."""
    if thread_pk is None:
        return []
    latest = (
        Run.objects.filter(thread_id=thread_pk, status__in=Run.FINISHED_STATUSES)
        .order_by("-created_at")
        .only("id", "status")
        .first()
    )
    if latest is None or latest.status != RunStatus.INTERRUPTED:
        return []
    rows = RunEvent.objects.filter(
        run_id=latest.pk, type=MetaEvent.type, payload__name__in=INTERRUPT_META_EVENT_NAMES
    ).order_by("seq")
    return [row.payload for row in rows]


# --- runs -------------------------------------------------------------------------------------


def run_log_read(
    *, run_id: str, after_seq: int, before_seq: int | None = None, limit: int = 1000
) -> list[LoggedEvent]:
    """Logged events of a run with ``after_seq < seq < before_seq``, in order, at most
    ``limit``."""
    rows = RunEvent.objects.filter(run_id=run_id, seq__gt=after_seq)
    if before_seq is not None:
        rows = rows.filter(seq__lt=before_seq)
    rows = rows.order_by("seq")[:limit]
    return [LoggedEvent(seq=row.seq, type=row.type, payload=row.payload) for row in rows]


# The key of a Celery run's request payload that holds what its task carried of the history
# (copilot_runtime/runs/task_history.py), for a later task that refers to it.
TASK_HISTORY_KEY = "task_history"


def run_task_histories(*, thread_pk: int) -> dict[str, dict[str, Any]]:
    """The history parts the runs of the thread ``thread_pk`` stored for their tasks, by run id
    (runs executed in-process, or queued by earlier versions, stored none)."""
    rows = Run.objects.filter(
        thread_id=thread_pk, request_payload__has_key=TASK_HISTORY_KEY
    ).values_list("id", f"request_payload__{TASK_HISTORY_KEY}")
    return {run_id: part for run_id, part in rows if isinstance(part, dict)}


def run_exists(*, run_id: str) -> bool:
    return Run.objects.filter(pk=run_id).exists()


def active_run_ids_for_caller(
    *, user: AbstractBaseUser | AnonymousUser, thread_id: str, run_id: str | None = None
) -> list[str]:
    """The caller's thread's pending or running runs (only ``run_id`` when given), oldest
    first; empty for a thread the caller cannot see."""
    thread = thread_get_for_caller(thread_id=thread_id, user=user)
    if thread is None:
        return []
    runs = Run.objects.filter(thread=thread, status__in=ACTIVE_STATUSES)
    if run_id:
        runs = runs.filter(pk=run_id)
    return list(runs.order_by("created_at").values_list("pk", flat=True))


def run_get_for_caller(*, run_id: str, user: AbstractBaseUser | AnonymousUser) -> Run | None:
    """The run if it exists and its thread is visible to ``user``; otherwise None."""
    run = Run.objects.select_related("thread").filter(pk=run_id).first()
    if run is None or not thread_is_visible_to(run.thread, user):
        return None
    return run


def run_logged_error(*, run_id: str) -> RunError | None:
    row = RunEvent.objects.filter(run_id=run_id, type=RunError.type).order_by("-seq").first()
    return RunError(**row.payload) if row is not None else None


def run_ended_unlogged(*, run_id: str) -> bool:
    """Finished, but its log will never get a ``run_finished`` (a follower would wait forever).

    A run's end is committed with its last events, so a finished run whose log has no
    ``run_finished`` never had one (e.g. refused by the before-request hook)."""
    run = Run.objects.filter(pk=run_id).only("status").first()
    if run is None or not run.is_finished:
        return False
    return not RunEvent.objects.filter(run_id=run_id, type=RunFinished.type).exists()
