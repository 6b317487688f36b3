"""What the real CopilotKit client puts on the wire, captured once per client version.

Tests that must hold a request open (httpx streaming) or read the raw response bytes send the
*real* client's request: its document text and headers, captured by pointing the pinned
client at a throwaway loopback server that records the POST and answers ``{}``.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from tests.e2e.js_client import run_js

CAPTURE_PATH = "/api/copilotkit"


@dataclass(frozen=True)
class CapturedRequest:
    """The client's ``generateCopilotResponse`` POST: document, operation name, headers."""

    query: str
    operation_name: str
    headers: dict[str, str]

    def body(self, data: dict[str, Any], properties: dict[str, Any] | None = None) -> str:
        """A JSON body with this document and new variables, compact like JSON.stringify."""
        payload = {
            "operationName": self.operation_name,
            "query": self.query,
            "variables": {"data": data, "properties": properties or {}},
        }
        return json.dumps(payload, separators=(",", ":"))

    def request_headers(self) -> dict[str, str]:
        """The headers a replay needs (content type, accept, the client version header)."""
        keep = ("accept", "content-type", "x-copilotkit-runtime-client-gql-version")
        return {name: value for name, value in self.headers.items() if name in keep}


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    recorded: list[tuple[dict[str, str], bytes]]

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep pytest output clean

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.recorded.append((headers, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")


@cache
def captured_generate_request(version: str) -> CapturedRequest:
    """The request runtime-client-gql ``version`` sends for ``generateCopilotResponse``."""
    recorded: list[tuple[dict[str, str], bytes]] = []
    handler = type("Recorder", (_Recorder,), {"recorded": recorded})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        run_js(
            version,
            {
                "op": "generate",
                "url": f"http://{host}:{port}{CAPTURE_PATH}",
                "data": {
                    "frontend": {"actions": []},
                    "messages": [],
                    "metadata": {"requestType": "Chat"},
                },
            },
        )
    finally:
        server.shutdown()
        server.server_close()
    if not recorded:
        raise RuntimeError(f"runtime-client-gql {version} sent no request to the capture server")
    headers, body = recorded[0]
    payload = json.loads(body)
    return CapturedRequest(
        query=payload["query"], operation_name=payload["operationName"], headers=headers
    )


def warm_up(server_url: str, fake_upstream: Any, *, version: str) -> None:
    """Serve one whole turn, then forget it on the fake upstream's side.

    A fresh server's first turn pays for lazy imports and first connections (over half a
    second); tests that abort after a fixed time warm the server first so that the abort
    lands where they mean it to. Call before scripting the test's own replies.
    """
    captured = captured_generate_request(version)
    fake_upstream.script({"text": "warm"})
    data = {
        "frontend": {"actions": []},
        "messages": [
            {
                "id": "warm-up",
                "createdAt": "2025-01-01T00:00:00.000Z",
                "textMessage": {"content": "warm up", "role": "user"},
            }
        ],
        "metadata": {"requestType": "Chat"},
        "threadId": f"warm-up-{uuid.uuid4()}",
    }
    response = httpx.post(
        server_url + CAPTURE_PATH,
        content=captured.body(data),
        headers=captured.request_headers(),
        timeout=30,
    )
    if response.status_code != 200 or b"SuccessResponseStatus" not in response.content:
        raise RuntimeError(f"warm-up turn failed: {response.status_code} {response.text[:500]}")
    fake_upstream.reset()
