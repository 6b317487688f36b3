"""How many websockets one process holds: a bound on all of them (``WEBSOCKET_MAX_CONNECTIONS``)
and a tighter one on those that have not completed ``connection_init``
(``WEBSOCKET_MAX_PENDING_INIT``), since anyone can open those without credentials.

``SocketLimiter`` (ASGI middleware, in front of the session lookup and the consumer) takes a
slot for each socket before anything else runs for it and gives it back when the connection's
application returns, however it ends: closed by the client or by the server, an error, the
task cancelled. (A socket the server closes counts until the server reports it disconnected,
which ends the application.) The consumer marks its slot initialised when it acknowledges
``connection_init``.

Over a bound the socket is accepted and closed at once with 4503 and the reason, rather than
refused at the handshake: a browser reports a refused handshake as 1006 with no reason, while a
close code and reason reach the client's close event and logs. Both npm clients retry either
way: graphql-ws with its backoff (4503 is not among its fatal codes), subscriptions-transport-ws
on any close when it reconnects. 1013 "Try Again Later" would be the RFC's code, but daphne
(autobahn) refuses to send codes from 1001 to 2999.

Every count changes on the event loop's thread with no await between a check and the change
that follows it, so sockets opening at once on one loop cannot both pass a bound: no lock.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL

from copilot_runtime.conf import runtime_setting

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# Where the consumer finds its slot (an ASGI scope extension key).
SLOT_SCOPE_KEY = "copilot_runtime.socket_slot"
# "Service unavailable" in the 4000 + HTTP status convention of 4400/4403/4408: try again.
BUSY_CLOSE_CODE = 4503
TOO_MANY_SOCKETS = "Too many open websockets on this server process; retry later"
TOO_MANY_PENDING = (
    "Too many websockets awaiting connection_init on this server process; retry later"
)
# A refusal is logged at most this often (a flood would otherwise flood the log too).
_LOG_EVERY_SECONDS = 60.0


@dataclass
class SocketCounts:
    """The process's open websockets, and how many of them await ``connection_init``."""

    open: int = 0
    pending_init: int = 0


COUNTS = SocketCounts()


class SocketSlot:
    """One admitted socket's share of the counts; each change applies once, in any order."""

    def __init__(self, counts: SocketCounts) -> None:
        self._counts = counts
        self._pending = True
        self._released = False
        counts.open += 1
        counts.pending_init += 1

    def initialised(self) -> None:
        if self._pending and not self._released:
            self._pending = False
            self._counts.pending_init -= 1

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self._counts.open -= 1
        if self._pending:
            self._pending = False
            self._counts.pending_init -= 1


def _bound(key: str) -> float:
    """A bound from the settings; 0 (or a value checks.py reports) means none."""
    value = runtime_setting(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return math.inf
    return value


def refusal_reason(counts: SocketCounts) -> str | None:
    """Why a new socket may not open now, or None."""
    if counts.open >= _bound("WEBSOCKET_MAX_CONNECTIONS"):
        return TOO_MANY_SOCKETS
    if counts.pending_init >= _bound("WEBSOCKET_MAX_PENDING_INIT"):
        return TOO_MANY_PENDING
    return None


def mark_initialised(scope: Scope) -> None:
    """The socket of ``scope`` completed ``connection_init`` (no-op without the limiter)."""
    slot = scope.get(SLOT_SCOPE_KEY)
    if isinstance(slot, SocketSlot):
        slot.initialised()


class _RefusalLog:
    def __init__(self) -> None:
        self._last = -math.inf
        self._refused = 0

    def refused(self, reason: str, counts: SocketCounts) -> None:
        self._refused += 1
        now = time.monotonic()
        if now - self._last < _LOG_EVERY_SECONDS:
            return
        logger.warning(
            "refused %d websocket(s) since the last warning: %s (%d open, %d awaiting "
            "connection_init; see WEBSOCKET_MAX_CONNECTIONS, WEBSOCKET_MAX_PENDING_INIT)",
            self._refused,
            reason,
            counts.open,
            counts.pending_init,
        )
        self._last, self._refused = now, 0


_REFUSALS = _RefusalLog()


def _subprotocol(scope: Scope) -> str | None:
    # The client's own choice among ours: a browser fails a handshake that answers none of
    # the subprotocols it offered, and the client would never see the close reason.
    offered = scope.get("subprotocols") or []
    ours = (GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL)
    return next((protocol for protocol in offered if protocol in ours), None)


async def _refuse(scope: Scope, receive: Receive, send: Send, reason: str) -> None:
    message = await receive()
    if message["type"] != "websocket.connect":
        return  # the client left before its handshake was answered
    await send({"type": "websocket.accept", "subprotocol": _subprotocol(scope)})
    await send({"type": "websocket.close", "code": BUSY_CLOSE_CODE, "reason": reason})


class SocketLimiter:
    """ASGI middleware for the websocket scope: applies the bounds and keeps the counts."""

    def __init__(self, application: Any, counts: SocketCounts = COUNTS) -> None:
        self.application = application
        self.counts = counts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> Any:
        if scope["type"] != "websocket":
            return await self.application(scope, receive, send)
        reason = refusal_reason(self.counts)
        if reason is not None:
            _REFUSALS.refused(reason, self.counts)
            return await _refuse(scope, receive, send, reason)
        slot = SocketSlot(self.counts)
        try:
            return await self.application({**scope, SLOT_SCOPE_KEY: slot}, receive, send)
        finally:
            slot.release()
