"""The bytes the real CopilotKit v2 frontend core (``@copilotkit/core`` 1.75 over
``@ag-ui/client`` 0.0.59) sends to start a run.

``POST <runtime>/agent/default/run`` with ``content-type: application/json`` and ``accept:
text/event-stream``, body the ``RunAgentInput`` compact like ``JSON.stringify``, keys in the order
``prepareRunAgentInput`` builds them (protocol reference 4.3). Each request is a first message in
a new chat: a fresh ``threadId`` and a fresh ``runId`` (the client mints both), the user message,
and one frontend tool, as the GraphQL benchmark's request carries one frontend action.
"""

from __future__ import annotations

import json
import uuid

from benchmarks.client_request import user_message_text

AGENT_RUN_PATH = "/agent/default/run"
ACCEPT = "text/event-stream"
SAY_HELLO_TOOL = {
    "name": "sayHello",
    "description": "Say hello",
    "parameters": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
}


def run_path(runtime_path: str) -> str:
    """The run route under the runtime's URL (``/api/copilotkit`` -> ``.../agent/default/run``)."""
    return runtime_path.rstrip("/") + AGENT_RUN_PATH


def request_body(*, thread_id: str, tokens: int) -> bytes:
    body = {
        "threadId": thread_id,
        "runId": str(uuid.uuid4()),
        "tools": [SAY_HELLO_TOOL],
        "context": [],
        "forwardedProps": {},
        "state": {},
        "messages": [
            {"id": str(uuid.uuid4()), "role": "user", "content": user_message_text(tokens=tokens)}
        ],
    }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def http_request(
    *, host: str, path: str, body: bytes, extra_headers: dict[str, str] | None = None
) -> bytes:
    """The whole HTTP/1.1 request (keep-alive), ready to write to a socket."""
    headers = {
        "host": host,
        "connection": "keep-alive",
        "content-type": "application/json",
        "accept": ACCEPT,
        **(extra_headers or {}),
        "content-length": str(len(body)),
    }
    head = f"POST {path} HTTP/1.1\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers.items()
    )
    return head.encode("latin-1") + b"\r\n" + body
