"""Fixtures for the websocket tests: the real websocket application, driven in-process.

``GraphQLSocket`` speaks either protocol over channels' ``WebsocketCommunicator`` (the raw one:
strawberry's test communicator only understands graphql-transport-ws ``next`` frames), with the
message names of the protocol it was opened with:

    socket = await open_socket(LEGACY)            # or TRANSPORT (graphql-transport-ws)
    assert (await socket.init({"token": raw}))["type"] == "connection_ack"
    await socket.subscribe("1", COPILOT_STREAM, {"data": ...})
    messages = await socket.until_done("1")       # the operation's results, then complete/error

Runs execute in the test's own event loop (the inline executor), against the fake upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import override_settings

from conversations.models import Run
from copilot_runtime.ws.routing import websocket_application

TRANSPORT = "graphql-transport-ws"
LEGACY = "graphql-ws"
PATH = "/api/copilotkit"
HOST = "testserver"
RECEIVE_TIMEOUT = 10.0

RUN_EVENT_FIELDS = """
    sequence type threadId runId messageId delta error raw
    message {
      __typename id
      ... on TextMessageOutput { role content parentMessageId }
      ... on ActionExecutionMessageOutput { name arguments }
      ... on ResultMessageOutput { actionExecutionId actionName result }
    }
    status {
      __typename
      ... on BaseResponseStatus { code }
      ... on FailedResponseStatus { reason details }
    }
"""

COPILOT_STREAM = f"""
subscription Stream($data: GenerateCopilotResponseInput!, $properties: JSONObject) {{
  copilotStream(data: $data, properties: $properties) {{ {RUN_EVENT_FIELDS} }}
}}
"""

RUN_EVENTS = f"""
subscription Attach($runId: String!, $afterSequence: Int) {{
  runEvents(runId: $runId, afterSequence: $afterSequence) {{ {RUN_EVENT_FIELDS} }}
}}
"""

STOP_RUN = "mutation Stop($runId: String!) { stopRun(runId: $runId) }"

RUNTIME_SETTINGS: dict[str, Any] = {
    "OPENAI_MAX_RETRIES": 0,
    "EVENT_FLUSH_MS": 5,
}


def fake(directive: dict[str, Any]) -> str:
    """A user message the fake upstream answers as ``directive`` says."""
    return "FAKE: " + orjson.dumps(directive).decode()


def generate_data(text: str, *, thread_id: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "frontend": {"actions": [], "url": "http://testserver/chat"},
        "messages": [
            {
                "id": f"user-{uuid.uuid4()}",
                "createdAt": "2025-01-01T00:00:00.000Z",
                "textMessage": {"content": text, "role": "user"},
            }
        ],
        "metadata": {"requestType": "Chat"},
        "forwardedParameters": {},
    }
    if thread_id is not None:
        data["threadId"] = thread_id
    return data


class GraphQLSocket:
    def __init__(self, communicator: WebsocketCommunicator, protocol: str) -> None:
        self.communicator = communicator
        self.protocol = protocol
        self.connected = False
        self.subprotocol: str | None = None
        self.close_code: int | None = None

    @property
    def result_type(self) -> str:
        return "next" if self.protocol == TRANSPORT else "data"

    async def connect(self) -> bool:
        # asgiref's communicator raises an application's failure only once its own wait has
        # timed out: the application's end is watched too, so a failure is raised at once.
        connecting = asyncio.ensure_future(self.communicator.connect(timeout=RECEIVE_TIMEOUT))
        application = self.communicator.future
        await asyncio.wait({connecting, application}, return_when=asyncio.FIRST_COMPLETED)
        if not connecting.done() and application.exception() is not None:
            connecting.cancel()
            application.result()  # raises the application's failure
        self.connected, detail = await connecting
        if self.connected:
            self.subprotocol = detail
        else:
            self.close_code = detail
        return self.connected

    async def send(self, message: dict[str, Any]) -> None:
        await self.communicator.send_json_to(message)

    async def receive(self, wait_seconds: float = RECEIVE_TIMEOUT) -> dict[str, Any]:
        """The next message; a close comes back as ``{"type": "websocket.close", ...}``."""
        output = await self.communicator.receive_output(wait_seconds)
        if output["type"] == "websocket.close":
            return output
        assert output["type"] == "websocket.send", output
        return json.loads(output["text"])

    async def init(self, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        message: dict[str, Any] = {"type": "connection_init"}
        if payload is not None:
            message["payload"] = payload
        await self.send(message)
        return await self.receive()

    async def subscribe(
        self, operation_id: str, query: str, variables: dict[str, Any] | None = None
    ) -> None:
        kind = "subscribe" if self.protocol == TRANSPORT else "start"
        payload = {"query": query, "variables": variables or {}}
        await self.send({"id": operation_id, "type": kind, "payload": payload})

    async def complete(self, operation_id: str) -> None:
        kind = "complete" if self.protocol == TRANSPORT else "stop"
        await self.send({"id": operation_id, "type": kind})

    async def until_done(
        self, operation_id: str, wait_seconds: float = RECEIVE_TIMEOUT
    ) -> list[dict[str, Any]]:
        """This operation's messages up to and including its ``complete`` or ``error``."""
        messages = []
        while True:
            message = await self.receive(wait_seconds)
            if message.get("type") == "websocket.close":
                raise AssertionError(f"socket closed before the operation ended: {message}")
            if message.get("id") != operation_id:
                continue
            messages.append(message)
            if message["type"] in ("complete", "error"):
                return messages

    async def results(self, operation_id: str, count: int) -> list[dict[str, Any]]:
        """The next ``count`` results (``next``/``data`` payloads) of the operation."""
        payloads = []
        while len(payloads) < count:
            message = await self.receive()
            if message.get("id") == operation_id:
                assert message["type"] == self.result_type, message
                payloads.append(message["payload"])
        return payloads

    async def close(self) -> None:
        await self.communicator.disconnect()


def payloads_of(messages: list[dict[str, Any]], field: str) -> list[dict[str, Any]]:
    """The ``field`` results of an operation's messages (the errors fail the test)."""
    results = [m["payload"] for m in messages if m["type"] in ("next", "data")]
    for result in results:
        assert not result.get("errors"), result
    return [result["data"][field] for result in results]


async def run_ended(run_id: str, wait_seconds: float = 15.0) -> Run:
    deadline = asyncio.get_running_loop().time() + wait_seconds
    while True:
        run = await Run.objects.aget(pk=run_id)
        if run.is_finished and run.finished_at is not None:
            return run
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"run {run_id} did not end (status {run.status})")
        await asyncio.sleep(0.025)


async def wait_until(
    probe: Callable[[], Awaitable[Any]], *, what: str, wait_seconds: float = 10.0
) -> Any:
    deadline = asyncio.get_running_loop().time() + wait_seconds
    while True:
        value = await probe()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.025)


OpenSocket = Callable[..., Awaitable[GraphQLSocket]]


@pytest.fixture
def runtime_on_fake(fake_upstream: Any) -> Iterator[Any]:
    with override_settings(
        COPILOT_RUNTIME={
            **RUNTIME_SETTINGS,
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
        }
    ):
        yield fake_upstream


@pytest.fixture
async def open_socket() -> AsyncIterator[OpenSocket]:
    """Open sockets on the real websocket application; all are closed at teardown."""
    application = websocket_application()
    opened: list[GraphQLSocket] = []

    async def open_(
        protocol: str = TRANSPORT,
        *,
        headers: dict[str, str] | None = None,
        expect_connected: bool = True,
    ) -> GraphQLSocket:
        raw_headers = [(b"host", HOST.encode())] + [
            (name.lower().encode(), value.encode()) for name, value in (headers or {}).items()
        ]
        communicator = WebsocketCommunicator(
            application, PATH, headers=raw_headers, subprotocols=[protocol]
        )
        socket = GraphQLSocket(communicator, protocol)
        opened.append(socket)
        connected = await socket.connect()
        assert connected is expect_connected, f"connected={connected}, code={socket.close_code}"
        return socket

    yield open_
    for socket in opened:
        if socket.connected:
            with contextlib.suppress(Exception):  # already closed by the server or the test
                await socket.close()


@pytest.fixture(autouse=True)
async def _close_run_thread_connections() -> AsyncIterator[None]:
    # Runs and resolvers reach the ORM through asgiref's thread; close its connection so the
    # test database can be dropped.
    yield
    await sync_to_async(connections.close_all)()
