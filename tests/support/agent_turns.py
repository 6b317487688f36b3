"""Helpers for agent tests: requests shaped like react-core's with an ``agentSession``, and
running a turn in-process to its end."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from django.contrib.auth.models import AnonymousUser

from conversations.models import Run
from copilot_runtime.events import Event
from copilot_runtime.events.request import TurnRequest
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.runs.start import turn_start

CREATED_AT = "2025-01-01T00:00:00.000Z"


def text(message_id: str, content: str, *, role: str = "user") -> dict[str, Any]:
    return {
        "id": message_id,
        "createdAt": CREATED_AT,
        "textMessage": {"content": content, "role": role},
    }


def agent_data(
    agent_name: str,
    messages: Iterable[Mapping[str, Any]],
    *,
    thread_id: str = "agent-thread",
    meta_events: list[dict[str, Any]] | None = None,
    agent_states: list[dict[str, Any]] | None = None,
    actions: list[dict[str, Any]] | None = None,
    node_name: str | None = None,
) -> dict[str, Any]:
    """``GenerateCopilotResponseInput`` variables of a ``<CopilotKit agent=...>`` app."""
    session: dict[str, Any] = {"agentName": agent_name, "threadId": thread_id}
    if node_name:
        session["nodeName"] = node_name
    data: dict[str, Any] = {
        "threadId": thread_id,
        "frontend": {"actions": list(actions or []), "url": "http://127.0.0.1/app"},
        "messages": [dict(message) for message in messages],
        "metadata": {"requestType": "Chat"},
        "agentSession": session,
    }
    if meta_events is not None:
        data["metaEvents"] = meta_events
    if agent_states is not None:
        data["agentStates"] = agent_states
    return data


def agent_request(
    agent_name: str, messages: Iterable[Mapping[str, Any]], **options: Any
) -> TurnRequest:
    properties = options.pop("properties", None)
    return parse_generate_input(agent_data(agent_name, messages, **options), properties or {})


async def run_ended(run_id: str) -> Run:
    for _ in range(400):
        run = await Run.objects.aget(pk=run_id)
        if run.is_finished:
            return run
        await asyncio.sleep(0.025)
    raise AssertionError(f"run {run_id} did not end")


async def run_turn(request: TurnRequest, *, user: Any = None) -> tuple[list[Event], Run]:
    """Start the turn, collect its events to the end, and return them with the ended run."""
    started = await turn_start(user=user or AnonymousUser(), request=request, protocol="graphql")
    events: list[Event] = []
    while (event := await asyncio.wait_for(started.events.get(), 30)) is not None:
        events.append(event)
    return events, await run_ended(started.run_id)


def streamed_text(events: Iterable[Event]) -> str:
    return "".join(getattr(event, "delta", "") for event in events if event.type == "text_delta")
