"""``loadAgentState``'s answer: the latest state and the thread's messages in the JSON the v1
client loads (``loadMessagesFromJsonRepresentation``), from what the conversations store holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from conversations.models import Message, MessageKind, Thread
from conversations.selectors import (
    agent_state_latest,
    thread_current_messages,
    thread_get_for_caller,
)


@dataclass(frozen=True)
class AgentStateLoad:
    thread_id: str
    thread_exists: bool
    state: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)


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
        if message.image_bytes.startswith(("http://", "https://")):
            return None  # a v2 client's image by URL: a v1 image message holds base64 bytes
        return {
            **base,
            "format": message.image_format,
            "bytes": message.image_bytes,
            "role": message.role,
        }
    return None


def thread_messages_as_copilotkit_json(*, thread: Thread) -> list[dict[str, Any]]:
    """The thread's current (not superseded) messages in order, as the client loads them."""
    rows = thread_current_messages(thread=thread)
    return [entry for entry in map(message_as_copilotkit_json, rows) if entry is not None]


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
    which caller may read which thread.

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
