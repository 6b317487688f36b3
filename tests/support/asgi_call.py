"""Calling the project's ASGI application in-process, as uvicorn would, and reading the reply.

    reply = await call("/api/copilotkit/agent/default/run", body, headers={...})
    reply.status, reply.headers, reply.body, reply.json()

The whole reply is collected (a streamed answer until its end). ``declared_length`` sends a
Content-Length other than the body's; ``body`` may be a list of chunks; ``on_send`` sees each
message the application sends, as it sends it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

import orjson


class Reply:
    def __init__(self, messages: list[dict[str, Any]]) -> None:
        start = next(m for m in messages if m["type"] == "http.response.start")
        self.status: int = start["status"]
        self.headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
        self.body = b"".join(
            m.get("body", b"") for m in messages if m["type"] == "http.response.body"
        )
        self.received: list[int] = []

    def json(self) -> Any:
        return orjson.loads(self.body)


async def call(
    path: str,
    body: bytes | Iterable[bytes] = b"",
    *,
    method: str = "POST",
    query_string: bytes = b"",
    headers: dict[str, str] | None = None,
    declared_length: int | None = None,
    app: Any = None,
    wait_seconds: float = 30,
    on_send: Callable[[dict[str, Any]], None] | None = None,
) -> Reply:
    chunks = [body] if isinstance(body, bytes) else list(body)
    raw_headers = {"content-type": "application/json", **(headers or {})}
    length = declared_length if declared_length is not None else sum(len(c) for c in chunks)
    raw_headers.setdefault("content-length", str(length))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query_string,
        "root_path": "",
        "headers": [(k.encode(), v.encode()) for k, v in raw_headers.items()],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    pending = list(chunks)
    received: list[int] = []

    async def receive() -> dict[str, Any]:
        if pending:
            chunk = pending.pop(0)
            received.append(len(chunk))
            return {"type": "http.request", "body": chunk, "more_body": bool(pending)}
        await asyncio.sleep(wait_seconds)
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if on_send is not None:
            on_send(message)

    if app is None:
        from copilot_runtime.site.asgi import application

        app = application
    await asyncio.wait_for(app(scope, receive, send), timeout=wait_seconds)
    reply = Reply(sent)
    reply.received = received
    return reply
