"""The checks the two v2 drivers make of every event they receive can fail: a stub runtime
answers with events its client's generation does not define, and ``run_agui`` (0.0.59, the
schemas of ``@ag-ui/core`` 0.0.59) and ``run_agui10`` (the 1.0 JSON Schema, and the client's
own warnings) refuse the result."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.e2e.agui10_client import run_agui10
from tests.e2e.agui_client import run_agui

pytestmark = pytest.mark.e2e

INFO = {
    "version": "1.75.0",
    "agents": {"default": {"name": "default", "description": "", "className": "HttpAgent"}},
    "audioFileTranscriptionEnabled": False,
    "mode": "sse",
}


class _Stub(BaseHTTPRequestHandler):
    events: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        return

    def _send(self, content_type: str, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send("application/json", json.dumps(INFO).encode())

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ids = {"threadId": request["threadId"], "runId": request["runId"]}
        frames = [{**event, **ids} if "threadId" in event else event for event in self.events]
        body = b"".join(b"data: " + json.dumps(frame).encode() + b"\n\n" for frame in frames)
        self._send("text/event-stream", body)


@pytest.fixture
def stub() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api/copilotkit"
    server.shutdown()
    server.server_close()


def test_an_event_0_0_59_does_not_define_fails_the_1_74_clients_run(stub: str) -> None:
    _Stub.events = [
        {"type": "RUN_STARTED", "threadId": ""},
        {"type": "TEXT_MESSAGE_START", "messageId": None, "role": "assistant"},
        {"type": "RUN_FINISHED", "threadId": ""},
    ]
    command = {"runtimeUrl": stub, "threadId": "t1", "steps": [{"op": "run"}]}
    with pytest.raises(AssertionError, match="TEXT_MESSAGE_START"):
        run_agui(command)


def test_a_0_0_59_field_fails_the_1_0_clients_run(stub: str) -> None:
    _Stub.events = [
        {"type": "RUN_STARTED", "threadId": "", "protocolVersion": "1.0"},
        {"type": "RUN_FINISHED", "threadId": "", "finishReason": "stop"},
    ]
    command = {"runtimeUrl": stub, "threadId": "t1", "steps": [{"op": "run"}]}
    with pytest.raises(AssertionError, match="unrecognised material at '/finishReason'"):
        run_agui10(command)
