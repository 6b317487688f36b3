"""Selectors: reading conversations for a caller (ownership applied everywhere)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from conversations.models import (
    AgentState,
    Message,
    MessageKind,
    Run,
    RunEvent,
    RunStatus,
    Thread,
)
from conversations.services.runs import INTERRUPT_META_EVENT_NAMES
from conversations.services.threads import thread_is_visible_to
from copilot_runtime.events import MetaEvent, RunError, RunFinished


@dataclass(frozen=True)
class AgentStateLoad:
    thread_id: str
    thread_exists: bool
    state: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)


def thread_get_for_caller(
    *, thread_id: str, user: AbstractBaseUser | AnonymousUser
) -> Thread | None:
    """The thread if it exists and the caller may see it; otherwise None (the same answer)."""
    thread = Thread.objects.filter(thread_id=thread_id).first()
    if thread is None or not thread_is_visible_to(thread, user):
        return None
    return thread


def _iso(value: Any) -> str:
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def message_as_copilotkit_json(message: Message) -> dict[str, Any] | None:
    """One stored message in the format ``loadMessagesFromJsonRepresentation`` reads."""
    base = {"id": message.message_id, "createdAt": _iso(message.created_at)}
    if message.kind == MessageKind.TEXT:
        entry = {**base, "role": message.role, "content": message.content}
        if message.parent_message_id:
            entry["parentMessageId"] = message.parent_message_id
        return entry
    if message.kind == MessageKind.ACTION_EXECUTION:
        return {
            **base,
            "name": message.action_name,
            "arguments": message.arguments if message.arguments is not None else {},
            "parentMessageId": message.parent_message_id or None,
        }
    if message.kind == MessageKind.RESULT:
        return {
            **base,
            "actionExecutionId": message.action_execution_id,
            "actionName": message.action_name,
            "result": message.result,
        }
    if message.kind == MessageKind.IMAGE:
        return {
            **base,
            "format": message.image_format,
            "bytes": message.image_bytes,
            "role": message.role,
        }
    return None


def thread_messages_as_copilotkit_json(*, thread: Thread) -> list[dict[str, Any]]:
    """The thread's current (not superseded) messages in order, as the client loads them."""
    rows = Message.objects.filter(thread=thread, superseded=False).order_by("position")
    return [entry for entry in map(message_as_copilotkit_json, rows) if entry is not None]


def agent_state_latest(*, thread: Thread, agent_name: str) -> AgentState | None:
    return AgentState.objects.filter(thread=thread, agent_name=agent_name).order_by("-id").first()


def agent_state_load(
    *, thread_id: str, agent_name: str, user: AbstractBaseUser | AnonymousUser
) -> AgentStateLoad:
    """What ``loadAgentState`` answers: the latest state and the thread's messages.

    The same for every agent kind: every state snapshot an agent streams through this runtime
    (chat engine, Python and LLM agents, remote endpoint and AG-UI agents alike) is stored as
    it streams, so Postgres holds the newest state this runtime saw. For a remote endpoint
    agent, Postgres wins over asking its ``/agents/state``: the page loads without a call to a
    peer that may be slow or down, the messages are the thread's own (with the tool results and
    states the runtime recorded), and ownership is checked here, where a peer cannot know
    which caller may read which thread. (agents/remote/state.py can still ask the endpoint.)

    Someone else's thread is answered exactly like a thread that does not exist.
    """
    thread = thread_get_for_caller(thread_id=thread_id, user=user)
    if thread is None:
        return AgentStateLoad(thread_id=thread_id, thread_exists=False)
    latest = agent_state_latest(thread=thread, agent_name=agent_name)
    return AgentStateLoad(
        thread_id=thread_id,
        thread_exists=True,
        state=latest.state if latest is not None else {},
        messages=thread_messages_as_copilotkit_json(thread=thread),
    )


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
