"""Small builders for conversation rows and client input messages, shared by the tests."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

from django.utils import timezone

from conversations.models import AgentState, Message, Run, Thread
from copilot_runtime.events.request import InputMessage

_sequence = itertools.count(1)


def thread_create(
    *,
    thread_id: str | None = None,
    owner: Any = None,
    agent_name: str = "default",
    title: str = "",
) -> Thread:
    return Thread.objects.create(
        thread_id=thread_id or f"thread-{next(_sequence)}",
        owner=owner,
        agent_name=agent_name,
        title=title,
    )


def run_row(*, thread: Thread, status: str = "pending", run_id: str | None = None) -> Run:
    """A run row as it is, without the service's side effects on the thread."""
    return Run.objects.create(id=run_id or f"run-{next(_sequence)}", thread=thread, status=status)


def message_row(
    *,
    thread: Thread,
    position: int,
    message_id: str | None = None,
    kind: str = "text",
    created_at: dt.datetime | None = None,
    **fields: Any,
) -> Message:
    return Message.objects.create(
        thread=thread,
        position=position,
        message_id=message_id or f"m-{next(_sequence)}",
        kind=kind,
        created_at=created_at or timezone.now(),
        **fields,
    )


def state_row(*, thread: Thread, state: dict[str, Any], agent_name: str = "default") -> AgentState:
    return AgentState.objects.create(thread=thread, agent_name=agent_name, state=state)


def text_input(message_id: str, content: str = "", *, role: str = "user") -> InputMessage:
    return InputMessage(
        id=message_id, kind="text", role=role, content=content or f"content of {message_id}"
    )
