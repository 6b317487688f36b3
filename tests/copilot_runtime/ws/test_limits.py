"""Sockets that never send connection_init are closed (4408), and one process holds a bounded
number of sockets (4503 over it), counted back down however a socket ends."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.checks import Error
from django.test import override_settings

from copilot_runtime.checks import check_runtime_settings
from copilot_runtime.conf import runtime_settings
from copilot_runtime.ws.consumer import RuntimeGraphQLWSConsumer
from copilot_runtime.ws.limits import (
    BUSY_CLOSE_CODE,
    COUNTS,
    TOO_MANY_PENDING,
    TOO_MANY_SOCKETS,
    SocketCounts,
    SocketSlot,
)
from tests.copilot_runtime.ws.conftest import (
    LEGACY,
    RUNTIME_SETTINGS,
    TRANSPORT,
    GraphQLSocket,
    OpenSocket,
    wait_until,
)

pytestmark = pytest.mark.django_db(transaction=True)

BOTH_PROTOCOLS = pytest.mark.parametrize("protocol", [TRANSPORT, LEGACY])
INIT_TIMEOUT = 0.5
# How much later than the timeout a close may come on a busy 2-core test machine.
SLACK_SECONDS = 5.0
# Long enough that no socket of the bound tests times out while they run.
NO_TIMEOUT = 60.0
TIMED_OUT = {"type": "websocket.close", "code": 4408, "reason": "Connection initialisation timeout"}


def _limits(**values: Any) -> Any:
    return override_settings(COPILOT_RUNTIME={**RUNTIME_SETTINGS, **values})


@pytest.fixture(autouse=True)
async def _no_socket_left_over() -> None:
    # The counts are the process's: a socket another test leaked would skew these tests.
    await _counts_become(0, 0)


@pytest.fixture
def short_init_timeout() -> Iterator[None]:
    with _limits(WEBSOCKET_INIT_TIMEOUT_SECONDS=INIT_TIMEOUT):
        yield


async def _counts_become(open_: int, pending_init: int) -> None:
    async def reached() -> bool:
        return (COUNTS.open, COUNTS.pending_init) == (open_, pending_init)

    await wait_until(
        reached, what=f"{open_} open and {pending_init} pending sockets (now {COUNTS})"
    )


async def _closed_by_the_timeout(socket: GraphQLSocket) -> dict[str, Any]:
    """The socket's next message, which must come within the timeout (and some slack)."""
    try:
        return await socket.receive(wait_seconds=INIT_TIMEOUT + SLACK_SECONDS)
    except TimeoutError:
        socket.connected = False  # the communicator cancelled the application: nothing to close
        raise AssertionError(f"not closed within {INIT_TIMEOUT + SLACK_SECONDS} s") from None


async def _answers_a_query(socket: GraphQLSocket) -> None:
    """The socket is open and serving: the answer to a query is the next message (no close).
    Strawberry runs no query over the legacy protocol: its answer is the operation's error."""
    await socket.subscribe("q", "query { hello }")
    message = await socket.receive()
    assert message.get("id") == "q", message
    if socket.protocol == TRANSPORT:
        assert message["payload"]["data"] == {"hello": "Hello World"}, message
    else:
        assert message["type"] == "error", message


async def _initialised(socket: GraphQLSocket) -> GraphQLSocket:
    assert (await socket.init())["type"] == "connection_ack"
    return socket


async def _refused(socket: GraphQLSocket, reason: str) -> None:
    # Accepted with the client's subprotocol (a browser fails a handshake answering none),
    # then closed at once with the reason.
    assert socket.subprotocol == socket.protocol
    assert await socket.receive() == {
        "type": "websocket.close",
        "code": BUSY_CLOSE_CODE,
        "reason": reason,
    }


# --- connection_init timeout ------------------------------------------------------------------


@BOTH_PROTOCOLS
async def test_a_socket_without_connection_init_is_closed_with_4408_after_the_timeout(
    protocol: str, open_socket: OpenSocket, short_init_timeout: None
) -> None:
    loop = asyncio.get_running_loop()
    opened_at = loop.time()
    socket = await open_socket(protocol)

    closed = await _closed_by_the_timeout(socket)

    assert closed == TIMED_OUT
    assert loop.time() - opened_at >= INIT_TIMEOUT


@BOTH_PROTOCOLS
async def test_an_initialised_socket_stays_open_past_the_timeout(
    protocol: str, open_socket: OpenSocket, short_init_timeout: None
) -> None:
    initialised = await _initialised(await open_socket(protocol))
    # Opened after the first was acknowledged: its close proves the timeout has passed for both.
    idle = await open_socket(protocol)
    assert await _closed_by_the_timeout(idle) == TIMED_OUT

    await _answers_a_query(initialised)


async def test_the_timeout_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, open_socket: OpenSocket
) -> None:
    monkeypatch.setenv("COPILOT_RUNTIME_WEBSOCKET_INIT_TIMEOUT_SECONDS", str(INIT_TIMEOUT))
    runtime_settings.cache_clear()
    try:
        socket = await open_socket(LEGACY)
        assert await _closed_by_the_timeout(socket) == TIMED_OUT
    finally:
        monkeypatch.delenv("COPILOT_RUNTIME_WEBSOCKET_INIT_TIMEOUT_SECONDS")
        runtime_settings.cache_clear()


# --- bounds -----------------------------------------------------------------------------------


@BOTH_PROTOCOLS
async def test_sockets_awaiting_connection_init_are_bounded(
    protocol: str, open_socket: OpenSocket
) -> None:
    with _limits(
        WEBSOCKET_INIT_TIMEOUT_SECONDS=NO_TIMEOUT,
        WEBSOCKET_MAX_PENDING_INIT=2,
        WEBSOCKET_MAX_CONNECTIONS=10,
    ):
        first, second = await open_socket(protocol), await open_socket(protocol)
        await _refused(await open_socket(protocol), TOO_MANY_PENDING)
        await _counts_become(2, 2)

        # An acknowledged connection_init frees its pending slot...
        await _initialised(first)
        third = await open_socket(protocol)
        await _refused(await open_socket(protocol), TOO_MANY_PENDING)

        # ...and so does a pending socket that closes.
        await second.close()
        await _counts_become(2, 1)
        await _answers_a_query(await _initialised(await open_socket(protocol)))
        await _answers_a_query(await _initialised(third))
        await _counts_become(3, 0)


@BOTH_PROTOCOLS
async def test_open_sockets_are_bounded(protocol: str, open_socket: OpenSocket) -> None:
    with _limits(WEBSOCKET_MAX_CONNECTIONS=2, WEBSOCKET_MAX_PENDING_INIT=2):
        first = await _initialised(await open_socket(protocol))
        second = await _initialised(await open_socket(protocol))
        await _refused(await open_socket(protocol), TOO_MANY_SOCKETS)

        await first.close()
        await _counts_become(1, 0)
        replacement = await _initialised(await open_socket(protocol))
        await _refused(await open_socket(protocol), TOO_MANY_SOCKETS)

        await _answers_a_query(replacement)
        await _answers_a_query(second)


async def test_zero_means_no_bound(open_socket: OpenSocket) -> None:
    with _limits(WEBSOCKET_MAX_CONNECTIONS=0, WEBSOCKET_MAX_PENDING_INIT=0):
        sockets = [await open_socket(TRANSPORT) for _ in range(5)]
        await _counts_become(5, 5)
        for socket in sockets:
            await _initialised(socket)
        await _counts_become(5, 0)


# --- the counts return to zero however a socket ends ------------------------------------------


@BOTH_PROTOCOLS
async def test_a_client_close_gives_the_slot_back(protocol: str, open_socket: OpenSocket) -> None:
    pending = await open_socket(protocol)
    initialised = await _initialised(await open_socket(protocol))
    await _counts_become(2, 1)

    await pending.close()
    await initialised.close()

    await _counts_become(0, 0)


@BOTH_PROTOCOLS
async def test_a_server_close_at_the_init_timeout_gives_the_slot_back(
    protocol: str, open_socket: OpenSocket, short_init_timeout: None
) -> None:
    socket = await open_socket(protocol)
    assert await _closed_by_the_timeout(socket) == TIMED_OUT

    await socket.close()  # the server's websocket.disconnect once the close handshake is done

    await _counts_become(0, 0)


@BOTH_PROTOCOLS
async def test_a_refused_caller_gives_the_slot_back(protocol: str, open_socket: OpenSocket) -> None:
    with _limits(ALLOW_ANONYMOUS=False):
        socket = await open_socket(protocol)
        refusal = await socket.init()
        if protocol == LEGACY:
            assert refusal["type"] == "connection_error"
            refusal = await socket.receive()
        assert (refusal["type"], refusal["code"]) == ("websocket.close", 4403)
        # A refused caller never counted as initialised.
        await _counts_become(1, 1)

        await socket.close()

    await _counts_become(0, 0)


async def test_an_error_in_the_consumer_gives_the_slot_back(
    monkeypatch: pytest.MonkeyPatch, open_socket: OpenSocket
) -> None:
    async def broken_connect(self: Any) -> None:
        raise RuntimeError("broken consumer")

    monkeypatch.setattr(RuntimeGraphQLWSConsumer, "connect", broken_connect)

    with pytest.raises(RuntimeError, match="broken consumer"):
        await open_socket(TRANSPORT)

    await _counts_become(0, 0)


@BOTH_PROTOCOLS
@pytest.mark.parametrize("initialised", [False, True])
async def test_a_cancelled_connection_gives_the_slot_back(
    protocol: str, initialised: bool, open_socket: OpenSocket
) -> None:
    socket = await open_socket(protocol)
    if initialised:
        await _initialised(socket)
    await _counts_become(1, 0 if initialised else 1)

    # What a server does to an application that outlives its connection.
    socket.communicator.future.cancel()
    await asyncio.wait({socket.communicator.future})
    socket.connected = False  # nothing left for the fixture to close

    assert socket.communicator.future.cancelled()
    await _counts_become(0, 0)


async def test_a_refused_socket_takes_no_slot(open_socket: OpenSocket) -> None:
    with _limits(WEBSOCKET_MAX_CONNECTIONS=1):
        kept = await open_socket(TRANSPORT)
        for _ in range(3):
            await _refused(await open_socket(TRANSPORT), TOO_MANY_SOCKETS)
        await _counts_become(1, 1)

        await kept.close()

    await _counts_become(0, 0)


def test_a_slot_counts_once_whatever_the_order() -> None:
    counts = SocketCounts()
    slot, other = SocketSlot(counts), SocketSlot(counts)
    assert counts == SocketCounts(open=2, pending_init=2)

    slot.initialised()
    slot.initialised()
    assert counts == SocketCounts(open=2, pending_init=1)
    slot.release()
    slot.release()
    slot.initialised()
    assert counts == SocketCounts(open=1, pending_init=1)

    other.release()
    other.initialised()
    assert counts == SocketCounts(open=0, pending_init=0)


# --- system checks ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("WEBSOCKET_INIT_TIMEOUT_SECONDS", 0),
        ("WEBSOCKET_INIT_TIMEOUT_SECONDS", -1.0),
        ("WEBSOCKET_INIT_TIMEOUT_SECONDS", float("inf")),
        ("WEBSOCKET_MAX_CONNECTIONS", -1),
        ("WEBSOCKET_MAX_PENDING_INIT", 2.5),
    ],
)
def test_checks_name_a_websocket_limit_that_cannot_work(key: str, value: float) -> None:
    with override_settings(COPILOT_RUNTIME={key: value}):
        errors = [m for m in check_runtime_settings() if isinstance(m, Error)]
    assert [error.id for error in errors] == ["copilot_runtime.E009"], errors
    assert key in errors[0].msg


def test_checks_accept_the_default_websocket_limits() -> None:
    settings_ = {
        "WEBSOCKET_INIT_TIMEOUT_SECONDS": 5,
        "WEBSOCKET_MAX_CONNECTIONS": 0,
        "WEBSOCKET_MAX_PENDING_INIT": 100.0,
    }
    with override_settings(COPILOT_RUNTIME=settings_):
        assert not [m for m in check_runtime_settings() if m.id == "copilot_runtime.E009"]
