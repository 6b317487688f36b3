"""A scriptable loopback HTTP server standing in for agent peers in tests.

Each path answers from a queue of ``Reply`` objects (the last one repeats): a status, a JSON
body, or a chunked stream of lines (JSON-lines fixtures, SSE events) that may stop mid-way
(the connection is dropped without the terminating chunk, as a crashed peer would). Every
request is recorded (path, headers, JSON body).

    with FixturePeer() as peer:
        peer.reply("/copilotkit/agents/execute", Reply.lines(fixture_lines("langgraph.jsonl")))
        peer.reply("/copilotkit/info", Reply(status=503), Reply.json({"actions": []}))
        peer.url  # "http://127.0.0.1:<port>"
        peer.requests  # [RecordedRequest(path, headers, body)]
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "agent_streams"
_START_TIMEOUT_S = 10.0


def fixture_lines(name: str) -> list[str]:
    """The lines of a fixture file (kept verbatim, blank lines and malformed ones included)."""
    return (FIXTURES / name).read_text().splitlines()


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    # A streamed body: each entry is sent as one chunk, followed by ``line_end``.
    stream: list[str] | None = None
    line_end: str = "\n"
    # Drop the connection after this many streamed entries (no terminating chunk).
    cut_after: int | None = None
    delay_s: float = 0.0  # before the status line
    gap_s: float = 0.0  # between streamed entries

    @classmethod
    def json(cls, value: Any, *, status: int = 200) -> Reply:
        return cls(status=status, body=json.dumps(value).encode())

    @classmethod
    def lines(cls, lines: list[str], **options: Any) -> Reply:
        return cls(stream=list(lines), **options)

    @classmethod
    def sse(cls, events: list[dict[str, Any] | str], **options: Any) -> Reply:
        encoded = [e if isinstance(e, str) else f"data: {json.dumps(e)}" for e in events]
        return cls(stream=encoded, line_end="\n\n", content_type="text/event-stream", **options)


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any


def _cancel_everything() -> None:
    for task in asyncio.all_tasks():
        task.cancel()


class FixturePeer:
    def __init__(self) -> None:
        self._routes: dict[str, deque[Reply]] = {}
        self.requests: list[RecordedRequest] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reply(self, path: str, *replies: Reply) -> None:
        """Answer ``path`` with these replies in order; the last one repeats."""
        self._routes[path] = deque(replies)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    # --- serving -------------------------------------------------------------------------------

    def _next_reply(self, path: str) -> Reply:
        queue = self._routes.get(path)
        if not queue:
            return Reply.json({"error": f"no fixture for {path}"}, status=404)
        return queue.popleft() if len(queue) > 1 else queue[0]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = await reader.readline()
            if not request_line:
                return
            _method, target, _version = request_line.decode().split(" ", 2)
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            raw = await reader.readexactly(int(headers.get("content-length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            path = target.split("?", 1)[0]
            self.requests.append(RecordedRequest(path=path, headers=headers, body=body))
            await self._respond(writer, self._next_reply(path))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _respond(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        head = [f"HTTP/1.1 {reply.status} Fixture", f"Content-Type: {reply.content_type}"]
        head += [f"{name}: {value}" for name, value in reply.headers.items()]
        head.append("Connection: close")
        if reply.stream is None:
            head.append(f"Content-Length: {len(reply.body)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + reply.body)
            await writer.drain()
            return
        head.append("Transfer-Encoding: chunked")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        for index, entry in enumerate(reply.stream):
            if reply.cut_after is not None and index >= reply.cut_after:
                await writer.drain()
                writer.transport.abort()  # a crash: no terminating chunk
                return
            chunk = (entry + reply.line_end).encode()
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            await writer.drain()
            if reply.gap_s:
                await asyncio.sleep(reply.gap_s)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def serve() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()
            async with self._server:
                await self._server.serve_forever()

        try:
            loop.run_until_complete(serve())
        except asyncio.CancelledError:
            pass
        finally:
            loop.close()

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="fixture-peer", daemon=True)
        self._thread.start()
        if not self._ready.wait(_START_TIMEOUT_S):
            raise RuntimeError("the fixture peer did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(_cancel_everything)
        if self._thread is not None:
            self._thread.join(_START_TIMEOUT_S)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
