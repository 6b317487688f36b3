"""The conversation load: each simulated user continues its own thread, re-sending the whole
history with every turn as the real clients do.

- v1 (``@copilotkit/runtime-client-gql``): the ``generateCopilotResponse`` mutation whose
  ``messages`` are every text message the client keeps, the user's and the assistant's (with
  the id and ``createdAt`` the server streamed back), the thread id the same each turn.
- v2 (``@copilotkit/core``): ``POST /agent/default/run`` with the same ``threadId``, a fresh
  ``runId`` each turn, and every message as ``{id, role, content}``.

A user whose thread reaches ``turns_per_thread`` turns starts a new thread. ``Turn`` holds what
one request delivered (time to first token, the reply, success); ``Conversation`` builds each
request body and keeps the history.

``Conversation.body_floor`` pads a body up to that many bytes with a ``padding`` text that
neither protocol reads: in the GraphQL request's ``extensions`` (graphql-yoga refuses unknown
top-level parameters), at the top of AG-UI's run input (which has no such field). The request
then costs its reading and parsing and nothing else. The one-thread row uses it to tell the
cost of a long body from that of a long thread.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson

from benchmarks.agui_request import SAY_HELLO_TOOL
from benchmarks.client_request import (
    ACCEPT as GRAPHQL_ACCEPT,
)
from benchmarks.client_request import (
    OPERATION_NAME,
    client_document,
    request_variables,
    user_message_text,
)
from benchmarks.response_reader import ROOT_FIELD, MultipartMixedParser, boundary_from_content_type
from benchmarks.sse_reader import SseParser

V1 = "graphql"
V2 = "agui"
RUNTIME_PATH = "/api/copilotkit"


@dataclass
class Turn:
    """What one request delivered (times on the caller's monotonic clock, in seconds)."""

    started_at: float
    first_token_at: float | None = None
    finished_at: float | None = None
    succeeded: bool = False
    failure: str = ""
    message_id: str | None = None
    created_at: str | None = None
    text: list[str] = field(default_factory=list)

    @property
    def ttft(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.started_at


def _dumps(value: Any) -> bytes:
    # The bytes of json.dumps(value, separators=(",", ":"), ensure_ascii=False), as the
    # browser's JSON.stringify writes them, at a fraction of the load generator's CPU: the
    # stdlib encoder of 50 users' histories took a quarter of it, on the machine it shares
    # with the servers it measures.
    return orjson.dumps(value)


def _padded(payload: dict[str, Any], padding: str) -> dict[str, Any]:
    if "query" in payload:  # GraphQL
        return {**payload, "extensions": {"padding": padding}}
    return {**payload, "padding": padding}


class Conversation:
    """One user's thread: the next request's body, and the history it grows."""

    def __init__(self, protocol: str, *, tokens: int, delay_ms: float | None = None) -> None:
        self.protocol = protocol
        self.tokens = tokens
        self.delay_ms = delay_ms
        self.thread_id = f"bench-{uuid.uuid4()}"
        self.turns = 0
        self._history: list[dict[str, Any]] = []
        self.body_floor = 0
        self.last_body_size = 0

    def next_body(self) -> bytes:
        self.turns += 1
        payload: dict[str, Any]
        if self.protocol == V1:
            variables = request_variables(thread_id=self.thread_id, tokens=self.tokens)
            first = variables["data"]["messages"][0]
            first["textMessage"]["content"] = self._user_text()
            self._history.append(first)
            variables["data"]["messages"] = self._history
            request = {"operationName": OPERATION_NAME, "query": client_document()}
            payload = {**request, "variables": variables}
        else:
            text = self._user_text()
            self._history.append({"id": str(uuid.uuid4()), "role": "user", "content": text})
            payload = {
                "threadId": self.thread_id,
                "runId": str(uuid.uuid4()),
                "tools": [SAY_HELLO_TOOL],
                "context": [],
                "forwardedProps": {},
                "state": {},
                "messages": self._history,
            }
        body = _dumps(payload)
        if self.body_floor > len(body):
            overhead = len(_dumps(_padded(payload, ""))) - len(body)
            short_by = self.body_floor - len(body) - overhead
            if short_by > 0:
                body = _dumps(_padded(payload, "x" * short_by))
        self.last_body_size = len(body)
        return body

    def _user_text(self) -> str:
        if self.delay_ms is None:
            return user_message_text(tokens=self.tokens)
        directive = {"tokens": self.tokens, "delay_ms": self.delay_ms}
        return "Hi\nFAKE: " + json.dumps(directive)

    def remember(self, turn: Turn) -> None:
        """Keep the assistant's reply, as the client does, for the next request."""
        if turn.message_id is None:
            return
        content = "".join(turn.text)
        if self.protocol == V1:
            self._history.append(
                {
                    "id": turn.message_id,
                    "createdAt": turn.created_at,
                    "textMessage": {"content": content, "role": "assistant"},
                }
            )
        else:
            self._history.append({"id": turn.message_id, "role": "assistant", "content": content})


def observe_v1_payload(turn: Turn, payload: dict[str, Any], now: float) -> None:
    if payload.get("errors"):
        turn.failure = str(payload["errors"])[:300]
    for entry in payload.get("incremental") or ():
        path = entry.get("path") or ()
        items = entry.get("items")
        if items is not None and len(path) == 3 and path[1] == "messages":
            for item in items:
                if isinstance(item, dict) and item.get("__typename") == "TextMessageOutput":
                    turn.message_id, turn.created_at = item.get("id"), item.get("createdAt")
                    turn.text.extend(i for i in item.get("content") or () if isinstance(i, str))
        elif items is not None and len(path) >= 2 and path[-2] == "content":
            turn.text.extend(item for item in items if isinstance(item, str))
            if turn.first_token_at is None and items:
                turn.first_token_at = now
        elif len(path) == 1 and path[0] == ROOT_FIELD:
            status = (entry.get("data") or {}).get("status") or {}
            turn.succeeded = status.get("code") == "Success" and not turn.failure
            if not turn.succeeded and not turn.failure:
                turn.failure = f"{status.get('reason')}: {status.get('details')}"[:300]
    if payload.get("hasNext") is False:
        turn.finished_at = now


def observe_v2_event(turn: Turn, event: dict[str, Any], now: float) -> None:
    kind = event.get("type")
    if kind == "TEXT_MESSAGE_START":
        turn.message_id = event.get("messageId")
    elif kind == "TEXT_MESSAGE_CONTENT":
        turn.message_id = turn.message_id or event.get("messageId")
        turn.text.append(str(event.get("delta") or ""))
        if turn.first_token_at is None:
            turn.first_token_at = now
    elif kind == "RUN_FINISHED":
        turn.succeeded, turn.finished_at = True, now
    elif kind == "RUN_ERROR":
        turn.failure = f"{event.get('code')}: {event.get('message')}"[:300]
        turn.finished_at = now


async def send_turn(
    session: aiohttp.ClientSession, base_url: str, conversation: Conversation
) -> Turn:
    """One request of ``conversation`` to the runtime at ``base_url``, read to its end."""
    body = conversation.next_body()
    turn = Turn(started_at=time.monotonic())
    if conversation.protocol == V1:
        url, accept = base_url + RUNTIME_PATH, GRAPHQL_ACCEPT
    else:
        url, accept = base_url + RUNTIME_PATH + "/agent/default/run", "text/event-stream"
    headers = {"content-type": "application/json", "accept": accept}
    try:
        async with session.post(url, data=body, headers=headers) as response:
            if response.status != 200:
                turn.failure = f"HTTP {response.status}: {(await response.read())[:200]!r}"
                return turn
            frames: Callable[[bytes], list[bytes]]
            if conversation.protocol == V1:
                boundary = boundary_from_content_type(response.headers.get("content-type", ""))
                frames = MultipartMixedParser(boundary or b"-").feed
            else:
                frames = SseParser().feed
            chunk = b""
            async for chunk in response.content.iter_any():
                now = time.monotonic()
                for frame in frames(chunk):
                    parsed = orjson.loads(frame)
                    if conversation.protocol == V1:
                        observe_v1_payload(turn, parsed, now)
                    else:
                        observe_v2_event(turn, parsed, now)
            if not turn.succeeded and not turn.failure:
                # Ended without its final status or an error: what came last says why (an
                # answer that is not a stream, a stream cut short cleanly).
                content_type = response.headers.get("content-type", "")
                turn.failure = f"ended without a final status ({content_type}): {chunk[-200:]!r}"
    except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
        turn.failure = f"{type(exc).__name__}: {exc}"[:300]
        return turn
    expected = " ".join(f"t{i}" for i in range(conversation.tokens))
    if turn.succeeded and "".join(turn.text).strip() != expected:
        turn.succeeded, turn.failure = False, "the reply is not the one the upstream sent"
    if turn.succeeded:
        conversation.remember(turn)
    return turn


@dataclass
class LoadResult:
    turns: list[Turn]
    seconds: float

    @property
    def ok(self) -> list[Turn]:
        return [turn for turn in self.turns if turn.succeeded]

    @property
    def failures(self) -> list[Turn]:
        return [turn for turn in self.turns if not turn.succeeded]


def new_session(users: int) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=users + 5, force_close=False),
        timeout=aiohttp.ClientTimeout(total=120),
    )


async def conversation_load(
    *,
    base_url: str,
    protocol: str,
    users: int,
    tokens: int,
    turns_per_thread: int,
    seconds: float,
    on_window: Callable[[bool], None] | None = None,
    warmup: float = 0.0,
    delay_ms: float | None = None,
) -> LoadResult:
    """``users`` users continuing their threads for ``warmup`` + ``seconds``; the turns that
    started inside the measured window are returned. ``on_window(True/False)`` is called when the
    window opens and closes (to sample the server's CPU)."""
    async with new_session(users) as session:
        loop_start = time.monotonic()
        window_open = loop_start + warmup
        window_close = window_open + seconds
        measured: list[Turn] = []
        opened = asyncio.Event()

        async def user() -> None:
            conversation = Conversation(protocol, tokens=tokens, delay_ms=delay_ms)
            while time.monotonic() < window_close:
                if conversation.turns >= turns_per_thread:
                    conversation = Conversation(protocol, tokens=tokens, delay_ms=delay_ms)
                turn = await send_turn(session, base_url, conversation)
                if window_open <= turn.started_at < window_close:
                    measured.append(turn)
                if not turn.succeeded:
                    conversation = Conversation(protocol, tokens=tokens, delay_ms=delay_ms)

        async def window() -> None:
            await asyncio.sleep(max(0.0, window_open - time.monotonic()))
            if on_window is not None:
                on_window(True)
            opened.set()
            await asyncio.sleep(max(0.0, window_close - time.monotonic()))

        tasks = [asyncio.create_task(user()) for _ in range(users)]
        await window()
        await asyncio.gather(*tasks)
        if on_window is not None:
            on_window(False)
        return LoadResult(turns=measured, seconds=seconds)
