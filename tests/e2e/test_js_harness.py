"""Tests of the Node harness itself, against a stdlib stub that replays recorded runtime bytes.

The stub answers with the exact multipart sequences captured from the TypeScript runtime 1.10.6
(protocol reference, section 3.4), so these tests pin down what the real client makes of them
before our own server exists.
"""

from __future__ import annotations

import json
import select
import socket
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.e2e.js_client import (
    JS_CLIENT_VERSIONS,
    JsClientError,
    ensure_js_clients_installed,
    run_js,
)

pytestmark = pytest.mark.e2e

GRAPHQL_PATH = "/api/copilotkit"
MULTIPART_CONTENT_TYPE = 'multipart/mixed; boundary="-"'
RECORDED_RUNTIME_VERSION = "1.10.6"

# --- Recorded payloads (reference 3.4), as (declared Content-Length, JSON text) --------------

TEXT_REPLY_PARTS: list[tuple[int, str]] = [
    (
        183,
        '{"data":{"generateCopilotResponse":{"threadId":"thread-abc","runId":"run-from-adapter",'
        '"extensions":null,"messages":[],"metaEvents":[],"__typename":"CopilotResponse"}},'
        '"hasNext":true}',
    ),
    (
        234,
        '{"incremental":[{"items":[{"__typename":"TextMessageOutput","id":"msg-1",'
        '"createdAt":"2026-11-21T21:38:11.344Z","content":[],"role":"assistant",'
        '"parentMessageId":null}],"path":["generateCopilotResponse","messages",0]}],'
        '"hasNext":true}',
    ),
    (
        112,
        '{"incremental":[{"items":["Hello"],"path":["generateCopilotResponse","messages",0,'
        '"content",0]}],"hasNext":true}',
    ),
    (
        113,
        '{"incremental":[{"items":[" world"],"path":["generateCopilotResponse","messages",0,'
        '"content",1]}],"hasNext":true}',
    ),
    (
        330,
        '{"incremental":[{"data":{"status":{"code":"Success","__typename":"SuccessResponseStatus"},'
        '"__typename":"CopilotResponse"},"path":["generateCopilotResponse"]},{"data":{"status":'
        '{"code":"Success","__typename":"SuccessMessageStatus"},"__typename":"TextMessageOutput"},'
        '"path":["generateCopilotResponse","messages",0]}],"hasNext":true}',
    ),
    (17, '{"hasNext":false}'),
]

TOOL_CALL_PARTS: list[tuple[int, str]] = [
    TEXT_REPLY_PARTS[0],
    (
        250,
        '{"incremental":[{"items":[{"__typename":"ActionExecutionMessageOutput","id":"call-1",'
        '"createdAt":"2026-11-21T21:38:21.532Z","name":"sayHello","arguments":[],'
        '"parentMessageId":"msg-2"}],"path":["generateCopilotResponse","messages",0]}],'
        '"hasNext":true}',
    ),
    (
        119,
        '{"incremental":[{"items":["{\\"name\\":"],"path":["generateCopilotResponse","messages",'
        '0,"arguments",0]}],"hasNext":true}',
    ),
    (
        117,
        '{"incremental":[{"items":["\\"Bob\\"}"],"path":["generateCopilotResponse","messages",'
        '0,"arguments",1]}],"hasNext":true}',
    ),
    (
        341,
        '{"incremental":[{"data":{"status":{"code":"Success","__typename":"SuccessResponseStatus"},'
        '"__typename":"CopilotResponse"},"path":["generateCopilotResponse"]},{"data":{"status":'
        '{"code":"Success","__typename":"SuccessMessageStatus"},'
        '"__typename":"ActionExecutionMessageOutput"},"path":["generateCopilotResponse",'
        '"messages",0]}],"hasNext":true}',
    ),
    (17, '{"hasNext":false}'),
]

GUARDRAILS_KEY_ERROR_BODY = (
    '{"errors":[{"message":"X-CopilotCloud-Public-API-Key header is required",'
    '"locations":[{"line":2,"column":3}],"path":["generateCopilotResponse"]}],"data":null}'
)


def multipart_writes(parts: list[tuple[int, str]]) -> list[bytes]:
    """Frame parts exactly as graphql-yoga writes them: one list entry per write()."""
    writes = [b"\r\n---"]
    for declared_length, payload in parts:
        encoded = payload.encode()
        assert len(encoded) == declared_length, "payload differs from the recorded bytes"
        writes.append(
            b"\r\nContent-Type: application/json; charset=utf-8\r\n"
            + f"Content-Length: {len(encoded)}\r\n\r\n".encode()
            + encoded
            + b"\r\n---"
        )
    writes.append(b"--\r\n")
    return writes


# --- Stub server ------------------------------------------------------------------------------


@dataclass
class StubReply:
    """One scripted HTTP answer; chunked replies are written one chunk per entry of `writes`."""

    writes: list[bytes]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunked: bool = True
    # After this many writes, stop and wait for the client to hang up (abort tests).
    hold_after_writes: int | None = None


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def streaming_reply(parts: list[tuple[int, str]], **options: Any) -> StubReply:
    headers = {
        "Content-Type": MULTIPART_CONTENT_TYPE,
        "X-CopilotKit-Runtime-Version": RECORDED_RUNTIME_VERSION,
    }
    return StubReply(writes=multipart_writes(parts), headers=headers, **options)


def json_reply(body: str, status: int = 200) -> StubReply:
    headers = {"Content-Type": "application/graphql-response+json; charset=utf-8"}
    return StubReply(writes=[body.encode()], status=status, headers=headers, chunked=False)


class StubRuntime:
    """Answers POSTs by GraphQL operationName from queues of scripted replies."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.client_hung_up = threading.Event()
        self._replies: dict[str, deque[StubReply]] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{GRAPHQL_PATH}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reply_to(self, operation_name: str, reply: StubReply) -> None:
        with self._lock:
            self._replies.setdefault(operation_name, deque()).append(reply)

    def take_reply(self, operation_name: str) -> StubReply | None:
        with self._lock:
            queue = self._replies.get(operation_name)
            return queue.popleft() if queue else None

    def reset(self) -> None:
        with self._lock:
            self._replies.clear()
            self.requests.clear()
            self.client_hung_up.clear()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return  # keep pytest output clean

            def do_GET(self) -> None:
                self._answer(b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._answer(self.rfile.read(length))

            def _answer(self, body: bytes) -> None:
                request = RecordedRequest(
                    method=self.command,
                    path=self.path,
                    headers={key.lower(): value for key, value in self.headers.items()},
                    body=body,
                )
                stub.requests.append(request)
                reply = stub.take_reply(_operation_name(body))
                if reply is None:
                    reply = json_reply('{"errors":[{"message":"stub has no reply"}]}', 500)
                self._send(reply)

            def _send(self, reply: StubReply) -> None:
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Content-Length", str(sum(map(len, reply.writes))))
                self.end_headers()
                for index, chunk in enumerate(reply.writes):
                    if reply.hold_after_writes is not None and index == reply.hold_after_writes:
                        self._wait_for_hang_up()
                        return
                    if reply.chunked:
                        chunk = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
                    self.wfile.write(chunk)
                    self.wfile.flush()
                if reply.chunked:
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()

            def _wait_for_hang_up(self, timeout: float = 10.0) -> None:
                readable, _, _ = select.select([self.connection], [], [], timeout)
                if readable and self.connection.recv(1, socket.MSG_PEEK) == b"":
                    stub.client_hung_up.set()
                self.close_connection = True

        return Handler


def _operation_name(body: bytes) -> str:
    try:
        return str(json.loads(body).get("operationName") or "*")
    except (ValueError, AttributeError):
        return "*"


@pytest.fixture(scope="module")
def stub_runtime() -> Iterator[StubRuntime]:
    ensure_js_clients_installed()
    stub = StubRuntime()
    stub.start()
    yield stub
    stub.stop()


@pytest.fixture
def stub(stub_runtime: StubRuntime) -> StubRuntime:
    stub_runtime.reset()
    return stub_runtime


# --- Requests ---------------------------------------------------------------------------------


def chat_request_data(**overrides: Any) -> dict[str, Any]:
    """A GenerateCopilotResponseInput shaped like the one react-core 1.10.6 sends."""
    data: dict[str, Any] = {
        "frontend": {
            "actions": [
                {
                    "name": "sayHello",
                    "description": "Say hello",
                    "jsonSchema": json.dumps(
                        {
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "required": ["name"],
                        }
                    ),
                    "available": "enabled",
                }
            ],
            "url": "http://127.0.0.1/page",
        },
        "threadId": "thread-abc",
        "runId": None,
        "messages": [
            {
                "id": "u1",
                "createdAt": "2025-01-01T00:00:00.000Z",
                "textMessage": {"content": "Hi", "role": "user"},
            }
        ],
        "metadata": {"requestType": "Chat"},
        "forwardedParameters": {},
    }
    data.update(overrides)
    return data


def generate_command(stub: StubRuntime, **extra: Any) -> dict[str, Any]:
    return {
        "op": "generate",
        "url": stub.url,
        "headers": {"x-custom": "1"},
        "data": chat_request_data(),
        "properties": {"foo": "bar"},
        **extra,
    }


def expected_mismatch_warnings(version: str) -> int:
    # The recorded server announces runtime 1.10.6; only a different client version warns.
    return 0 if version == RECORDED_RUNTIME_VERSION else 1


versions = pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)


# --- generateCopilotResponse ------------------------------------------------------------------


@versions
def test_text_reply_is_reassembled_from_incremental_parts(stub: StubRuntime, version: str) -> None:
    stub.reply_to("generateCopilotResponse", streaming_reply(TEXT_REPLY_PARTS))

    result = run_js(version, generate_command(stub))

    assert result["clientVersion"] == version
    assert result["errors"] == []
    final = result["final"]
    assert final["threadId"] == "thread-abc"
    assert final["runId"] == "run-from-adapter"
    assert final["status"] == {"code": "Success", "__typename": "SuccessResponseStatus"}
    assert final["messages"][0]["content"] == ["Hello", " world"]
    assert final["messages"][0]["status"]["code"] == "Success"
    assert result["snapshots"] >= 2
    assert result["firstMessageMs"] is not None
    assert result["aborted"] is False
    converted = result["messages"]
    assert [(m["type"], m["id"], m["content"], m["role"]) for m in converted] == [
        ("TextMessage", "msg-1", "Hello world", "assistant")
    ]
    assert len(result["warnings"]) == expected_mismatch_warnings(version)


@versions
def test_snapshots_show_each_incremental_part(stub: StubRuntime, version: str) -> None:
    stub.reply_to("generateCopilotResponse", streaming_reply(TEXT_REPLY_PARTS))

    result = run_js(version, generate_command(stub, keepSnapshots=True))

    values = result["snapshotValues"]
    assert result["snapshots"] == len(values) == len(TEXT_REPLY_PARTS)
    contents = [[message["content"] for message in value["messages"]] for value in values]
    assert contents[:4] == [[], [[]], [["Hello"]], [["Hello", " world"]]]
    assert "status" not in values[3]
    assert values[-1]["status"]["code"] == "Success"
    assert result["firstMessageMs"] <= result["firstContentMs"] <= result["totalMs"]


@versions
def test_request_carries_client_headers_and_variables(stub: StubRuntime, version: str) -> None:
    stub.reply_to("generateCopilotResponse", streaming_reply(TEXT_REPLY_PARTS))

    run_js(version, generate_command(stub))

    (request,) = stub.requests
    assert request.method == "POST"
    assert request.path == GRAPHQL_PATH
    assert request.headers["x-copilotkit-runtime-client-gql-version"] == version
    assert request.headers["x-custom"] == "1"
    assert request.headers["content-type"] == "application/json"
    assert "multipart/mixed" in request.headers["accept"]
    body = request.json()
    assert body["operationName"] == "generateCopilotResponse"
    assert "@stream" in body["query"] and "@defer" in body["query"]
    assert body["variables"]["data"] == chat_request_data()
    assert body["variables"]["properties"] == {"foo": "bar"}


@versions
def test_frontend_tool_call_arguments_are_reassembled(stub: StubRuntime, version: str) -> None:
    stub.reply_to("generateCopilotResponse", streaming_reply(TOOL_CALL_PARTS))

    result = run_js(version, generate_command(stub))

    assert result["errors"] == []
    message = result["final"]["messages"][0]
    assert message["__typename"] == "ActionExecutionMessageOutput"
    assert message["arguments"] == ['{"name":', '"Bob"}']
    assert result["final"]["status"]["__typename"] == "SuccessResponseStatus"
    (converted,) = result["messages"]
    assert converted["type"] == "ActionExecutionMessage"
    assert converted["name"] == "sayHello"
    assert converted["arguments"] == {"name": "Bob"}
    assert converted["parentMessageId"] == "msg-2"


@versions
def test_graphql_error_comes_back_as_json(stub: StubRuntime, version: str) -> None:
    stub.reply_to("generateCopilotResponse", json_reply(GUARDRAILS_KEY_ERROR_BODY))

    result = run_js(version, generate_command(stub))

    assert result["final"] is None
    (error,) = result["errors"]
    assert error["graphQLErrors"][0]["message"] == (
        "X-CopilotCloud-Public-API-Key header is required"
    )
    assert "handleGQLErrors" in error["via"]
    assert "stream" in error["via"]


@versions
@pytest.mark.parametrize(
    ("http_status", "error_name", "error_code"),
    [
        # The client maps 400/404 to an API-discovery error and other 4xx/500 to UNKNOWN; the
        # real status only survives in the driver's `http` log.
        (400, "CopilotApiDiscoveryError", "API_NOT_FOUND"),
        (401, "ResolvedCopilotKitError", "UNKNOWN"),
        (500, "ResolvedCopilotKitError", "UNKNOWN"),
    ],
)
def test_http_error_status_is_reported(
    stub: StubRuntime, version: str, http_status: int, error_name: str, error_code: str
) -> None:
    stub.reply_to("generateCopilotResponse", json_reply('{"detail":"nope"}', status=http_status))

    result = run_js(version, generate_command(stub))

    assert result["final"] is None
    assert [exchange["status"] for exchange in result["http"]] == [http_status]
    (error,) = result["errors"]
    assert error["networkError"]["name"] == error_name
    assert error["networkError"]["extensions"]["code"] == error_code
    assert "handleGQLErrors" in error["via"]


@versions
def test_unreachable_server_is_reported_not_crashed(version: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    command = {
        "op": "generate",
        "url": f"http://127.0.0.1:{free_port}{GRAPHQL_PATH}",
        "data": chat_request_data(),
    }

    result = run_js(version, command)

    assert result["final"] is None
    (error,) = result["errors"]
    assert error["networkError"]["name"] == "CopilotKitLowLevelError"
    assert error["networkError"]["extensions"]["code"] == "NETWORK_ERROR"
    (exchange,) = result["http"]
    assert exchange["status"] is None
    assert exchange["error"]["cause"]["code"] == "ECONNREFUSED"


@versions
def test_abort_after_first_message_hangs_up_like_a_browser(stub: StubRuntime, version: str) -> None:
    # Hold the stream open after the first message item; only an abort can end it.
    stub.reply_to("generateCopilotResponse", streaming_reply(TEXT_REPLY_PARTS, hold_after_writes=3))

    result = run_js(version, generate_command(stub, abortAfterFirstMessage=True), timeout=30)

    assert result["aborted"] is True
    assert result["firstMessageMs"] is not None
    assert result["final"]["messages"][0]["id"] == "msg-1"
    # Browser-style aborts are swallowed by the client, not surfaced as errors.
    assert result["errors"] == []
    assert stub.client_hung_up.wait(5)


# --- queries and raw requests -----------------------------------------------------------------


@versions
def test_available_agents(stub: StubRuntime, version: str) -> None:
    body = (
        '{"data":{"availableAgents":{"agents":[{"name":"weather","id":"a1",'
        '"description":"Weather agent","__typename":"Agent"}],"__typename":"AgentsResponse"}}}'
    )
    stub.reply_to("availableAgents", json_reply(body))

    result = run_js(version, {"op": "availableAgents", "url": stub.url, "headers": {}})

    assert result["errors"] == []
    assert result["data"]["availableAgents"]["agents"][0]["name"] == "weather"
    assert stub.requests[0].json()["operationName"] == "availableAgents"


@versions
def test_load_agent_state_messages_are_rebuilt_by_the_client(
    stub: StubRuntime, version: str
) -> None:
    stored_messages = [
        {"id": "m1", "role": "user", "content": "Hi"},
        {"id": "m2", "name": "sayHello", "arguments": {"name": "Bob"}, "parentMessageId": "m1"},
        {"id": "m3", "actionExecutionId": "m2", "actionName": "sayHello", "result": "done"},
    ]
    payload = {
        "data": {
            "loadAgentState": {
                "threadId": "t-1",
                "threadExists": True,
                "state": json.dumps({"counter": 2}),
                "messages": json.dumps(stored_messages),
                "__typename": "LoadAgentStateResponse",
            }
        }
    }
    stub.reply_to("loadAgentState", json_reply(json.dumps(payload)))
    command = {
        "op": "loadAgentState",
        "url": stub.url,
        "headers": {},
        "threadId": "t-1",
        "agentName": "weather",
    }

    result = run_js(version, command)

    assert result["errors"] == []
    assert result["state"] == {"counter": 2}
    assert [m["type"] for m in result["messages"]] == [
        "TextMessage",
        "ActionExecutionMessage",
        "ResultMessage",
    ]
    assert result["messages"][1]["arguments"] == {"name": "Bob"}
    (request,) = stub.requests
    assert request.json()["variables"] == {"data": {"threadId": "t-1", "agentName": "weather"}}


@versions
def test_load_agent_state_error_reaches_the_error_handler(stub: StubRuntime, version: str) -> None:
    body = (
        '{"data":null,"errors":[{"message":"Agent not found","path":["loadAgentState"],'
        '"extensions":{"code":"AGENT_NOT_FOUND","visibility":"banner"}}]}'
    )
    stub.reply_to("loadAgentState", json_reply(body))
    command = {"op": "loadAgentState", "url": stub.url, "threadId": "t", "agentName": "nobody"}

    result = run_js(version, command)

    (error,) = result["errors"]
    assert error["graphQLErrors"][0]["extensions"]["code"] == "AGENT_NOT_FOUND"
    assert set(error["via"]) == {"result", "handleGQLErrors"}


@versions
def test_raw_request_returns_status_headers_and_text(stub: StubRuntime, version: str) -> None:
    stub.reply_to("generateCopilotResponse", json_reply('{"errors":[]}', status=406))
    command = {
        "op": "raw",
        "url": stub.url,
        "headers": {"x-extra": "yes"},
        "accept": "application/json",
        "body": {"operationName": "generateCopilotResponse", "query": "{ x }"},
    }

    result = run_js(version, command)

    assert result["status"] == 406
    assert result["headers"]["content-type"].startswith("application/graphql-response+json")
    assert result["text"] == '{"errors":[]}'
    (request,) = stub.requests
    assert request.headers["accept"] == "application/json"
    assert request.headers["x-extra"] == "yes"


# --- sequences --------------------------------------------------------------------------------


@versions
def test_frontend_action_round_trip_in_one_sequence(stub: StubRuntime, version: str) -> None:
    stub.reply_to("generateCopilotResponse", streaming_reply(TOOL_CALL_PARTS))
    stub.reply_to("generateCopilotResponse", streaming_reply(TEXT_REPLY_PARTS))
    command = {
        "op": "sequence",
        "url": stub.url,
        "headers": {"x-custom": "1"},
        "commands": [
            {"op": "generate", "data": chat_request_data()},
            {"op": "generate", "followUp": {"actionResults": {"sayHello": "Said hello to Bob"}}},
        ],
    }

    result = run_js(version, command)

    first, second = result["results"]
    assert first["messages"][0]["arguments"] == {"name": "Bob"}
    assert second["final"]["messages"][0]["content"] == ["Hello", " world"]
    follow_up = stub.requests[1].json()["variables"]["data"]
    assert follow_up["threadId"] == "thread-abc"
    assert follow_up["runId"] == "run-from-adapter"
    sent = follow_up["messages"]
    assert sent[0]["id"] == "u1"
    assert sent[1]["id"] == "call-1"
    assert sent[1]["actionExecutionMessage"] == {
        "name": "sayHello",
        "arguments": '{"name":"Bob"}',
        "parentMessageId": "msg-2",
    }
    assert sent[2]["resultMessage"] == {
        "result": "Said hello to Bob",
        "actionExecutionId": "call-1",
        "actionName": "sayHello",
    }
    assert len(sent) == 3


def test_driver_failure_raises_with_node_stderr(stub: StubRuntime) -> None:
    with pytest.raises(JsClientError, match="unknown op"):
        run_js(JS_CLIENT_VERSIONS[0], {"op": "teleport", "url": stub.url})
