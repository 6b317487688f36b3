"""A loopback stand-in for Copilot Cloud's ``POST /guardrails/validate``.

It records each request (headers, JSON body) and answers from a queue of scripted replies
(``{"status": "allowed"}`` by default). A reply may wait before answering, either a fixed
``delay`` or until ``wait_until()`` is true (polled), to stand for a slow classifier.

    with CloudGuardrailsStandIn() as cloud:
        cloud.reply({"status": "denied", "reason": "Topic not allowed"})
        ... COPILOT_RUNTIME_COPILOT_CLOUD_BASE_URL=cloud.base_url ...
        cloud.requests[0].body["invalidTopics"]
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

VALIDATE_PATH = "/guardrails/validate"


@dataclass
class CloudReply:
    body: Any = field(default_factory=lambda: {"status": "allowed"})
    status_code: int = 200
    delay: float = 0.0
    wait_until: Callable[[], bool] | None = None
    wait_timeout: float = 20.0
    raw: bytes | None = None  # sent instead of the JSON body


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: Any


class CloudGuardrailsStandIn:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._replies: deque[CloudReply] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def reply(self, body: Any = None, **options: Any) -> None:
        """Queue one reply (consumed first in, first out; then ``allowed``)."""
        with self._lock:
            self._replies.append(
                CloudReply(body=body if body is not None else {"status": "allowed"}, **options)
            )

    def _next_reply(self) -> CloudReply:
        with self._lock:
            return self._replies.popleft() if self._replies else CloudReply()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = raw.decode(errors="replace")
                with stand_in._lock:
                    stand_in.requests.append(
                        RecordedRequest(
                            path=self.path,
                            headers={k.lower(): v for k, v in self.headers.items()},
                            body=body,
                        )
                    )
                if self.path != VALIDATE_PATH:
                    self._send(404, b'{"error":"not found"}')
                    return
                reply = stand_in._next_reply()
                if reply.wait_until is not None:
                    deadline = time.monotonic() + reply.wait_timeout
                    while not reply.wait_until() and time.monotonic() < deadline:
                        time.sleep(0.01)
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                self._send(reply.status_code, payload)

            def _send(self, status: int, payload: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the runtime gave up waiting (a timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def start(self) -> Self:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="cloud-guardrails", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
