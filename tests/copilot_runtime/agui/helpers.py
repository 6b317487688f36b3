"""Calling the v2 routes through Django's async test client, and reading SSE answers."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.db import connections
from django.http import HttpResponse
from django.test import AsyncClient

from tests.support.ag_ui_events import assert_ag_ui_events

BASE = "/api/copilotkit"


def fake(directive: dict[str, Any]) -> str:
    return "FAKE: " + orjson.dumps(directive).decode()


def run_body(
    thread_id: str,
    messages: list[dict[str, Any]],
    *,
    run_id: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": run_id or str(uuid.uuid4()),
        "tools": tools or [],
        "context": [],
        "forwardedProps": {},
        "state": {},
        "messages": messages,
        **extra,
    }


def user(message_id: str, content: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "content": content}


async def post(client: AsyncClient, path: str, payload: Any, **headers: str) -> HttpResponse:
    return await client.post(
        BASE + path, orjson.dumps(payload), content_type="application/json", headers=headers
    )


async def read_events(response: HttpResponse) -> list[dict[str, Any]]:
    """The SSE events of a streamed answer (checking the framing on the way)."""
    chunks = [chunk async for chunk in response.streaming_content]
    await sync_to_async(connections.close_all)()
    raw = b"".join(chunks)
    if not raw:
        return []
    assert raw.endswith(b"\n\n"), raw[-200:]
    events = []
    for frame in raw[:-2].split(b"\n\n"):
        assert frame.startswith(b"data: "), frame
        assert b"\n" not in frame
        events.append(orjson.loads(frame[len(b"data: ") :]))
    assert_ag_ui_events(events)
    return events


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def body_of(response: HttpResponse) -> Any:
    return orjson.loads(response.content)
