"""The websocket bounds and the connection_init timeout through a served uvicorn (the production
server): the close codes and reasons reach a real client, and the settings come from
``COPILOT_RUNTIME_*`` environment variables."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from copilot_runtime.ws.limits import BUSY_CLOSE_CODE, TOO_MANY_PENDING, TOO_MANY_SOCKETS

if TYPE_CHECKING:
    from tests.conftest import ServedProcess

pytestmark = pytest.mark.e2e

INIT_TIMEOUT = 1.0
WAIT_SECONDS = 10.0
TIMED_OUT = (4408, "Connection initialisation timeout")


@pytest.fixture
def server(live_server_factory: Any) -> ServedProcess:
    return live_server_factory(
        env={
            "COPILOT_RUNTIME_ALLOW_ANONYMOUS": "true",
            "COPILOT_RUNTIME_WEBSOCKET_INIT_TIMEOUT_SECONDS": str(INIT_TIMEOUT),
            "COPILOT_RUNTIME_WEBSOCKET_MAX_CONNECTIONS": "2",
            "COPILOT_RUNTIME_WEBSOCKET_MAX_PENDING_INIT": "1",
        }
    )


async def _open(server: ServedProcess, protocol: str) -> ClientConnection:
    url = server.url.replace("http://", "ws://", 1) + "/api/copilotkit"
    return await connect(url, subprotocols=[protocol], open_timeout=WAIT_SECONDS)  # type: ignore[list-item]


async def _close_of(socket: ClientConnection) -> tuple[int, str]:
    """The server's close code and reason; no message may come before it."""
    async with asyncio.timeout(WAIT_SECONDS):
        try:
            message = await socket.recv()
        except ConnectionClosed as closed:
            assert closed.rcvd is not None
            return closed.rcvd.code, closed.rcvd.reason
    raise AssertionError(f"a message instead of the close: {message!r}")


async def _admitted(server: ServedProcess, protocol: str) -> ClientConnection:
    """A socket past connection_init, once a slot is free: a slot comes back when the server
    delivers the closed socket's disconnect, which may trail the close a client sees."""
    async with asyncio.timeout(WAIT_SECONDS):
        while True:
            socket = await _open(server, protocol)
            try:
                await socket.send(json.dumps({"type": "connection_init", "payload": {}}))
                reply = json.loads(await socket.recv())
            except ConnectionClosed as closed:
                assert closed.rcvd is not None and closed.rcvd.code == BUSY_CLOSE_CODE, closed
                await asyncio.sleep(0.05)
                continue
            assert reply["type"] == "connection_ack", reply
            return socket


@pytest.mark.parametrize("protocol", ["graphql-transport-ws", "graphql-ws"])
async def test_bounds_and_init_timeout_on_a_served_process(
    server: ServedProcess, protocol: str
) -> None:
    loop = asyncio.get_running_loop()
    opened_at = loop.time()
    idle = await _open(server, protocol)

    # One socket awaiting connection_init is the bound: the next is told why and closed.
    refused = await _open(server, protocol)
    assert refused.subprotocol == protocol
    assert await _close_of(refused) == (BUSY_CLOSE_CODE, TOO_MANY_PENDING)

    # The idle one is closed at the timeout, which frees its slot.
    assert await _close_of(idle) == TIMED_OUT
    assert loop.time() - opened_at >= INIT_TIMEOUT
    first = await _admitted(server, protocol)
    second = await _admitted(server, protocol)

    # Two open sockets are the bound.
    assert await _close_of(await _open(server, protocol)) == (BUSY_CLOSE_CODE, TOO_MANY_SOCKETS)

    await first.close()
    replacement = await _admitted(server, protocol)
    for socket in (second, replacement):
        await socket.close()
