"""Selectors: reading conversations for a caller (ownership applied everywhere)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from conversations.models import (
    AgentState,
    Message,
    Run,
    RunEvent,
    RunStatus,
    Thread,
)
from conversations.services.runs import INTERRUPT_META_EVENT_NAMES
from conversations.services.threads import thread_is_visible_to
from copilot_runtime.events import MetaEvent, RunError, RunFinished


def thread_get_for_caller(
    *, thread_id: str, user: AbstractBaseUser | AnonymousUser
) -> Thread | None:
    """The thread if it exists and the caller may see it; otherwise None (the same answer)."""
    thread = Thread.objects.filter(thread_id=thread_id).first()
    if thread is None or not thread_is_visible_to(thread, user):
        return None
    return thread


def thread_current_messages(*, thread: Thread) -> list[Message]:
    """The thread's current (not superseded) messages in order."""
    return list(Message.objects.filter(thread=thread, superseded=False).order_by("position"))


def agent_state_latest(*, thread: Thread, agent_name: str) -> AgentState | None:
    return AgentState.objects.filter(thread=thread, agent_name=agent_name).order_by("-id").first()


def thread_pending_interrupt(*, thread_id: str) -> list[dict[str, Any]]:
    """The interrupt a thread waits on: the interrupt meta events (their logged payloads) of
    its latest finished run when that run ended ``interrupted``; else an empty list."""
    latest = (
        Run.objects.filter(thread__thread_id=thread_id, status__in=Run.FINISHED_STATUSES)
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
