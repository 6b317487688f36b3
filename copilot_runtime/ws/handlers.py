"""Strawberry's two protocol handlers, adjusted for the runtime.

- Errors are formatted as on HTTP (``errors.ErrorFormattingSchema``).
- Each operation's task starts with its own ``SubscriptionEnd`` (a context variable, inherited
  by the task the handler creates for it), marked when the client completes/stops that
  operation: ``copilotStream`` cancels its run on an explicit stop only, not when the socket
  drops (see ``graphql.resolvers.subscriptions``).
- Before each operation the connection's caller is checked again (``caller_still_allowed``):
  a token revoked or a user deactivated after ``connection_init`` closes the socket (4403,
  with the reason) instead of starting the operation.
- graphql-transport-ws: a document that does not parse, or names no runnable operation, gets an
  ``error`` message for its operation id, like any other invalid document, instead of closing
  the whole socket (4400), which would also end the connection's other operations.
- The legacy protocol: a socket that sends no ``connection_init`` within the consumer's
  ``connection_init_wait_timeout`` is closed with 4408, as strawberry does on
  graphql-transport-ws (strawberry waits forever on the legacy protocol).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Iterator
from typing import Any

from graphql import GraphQLError
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)
from strawberry.subscriptions.protocols.graphql_transport_ws.types import (
    CompleteMessage,
    SubscribeMessage,
)
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.subscriptions.protocols.graphql_ws.types import (
    ConnectionInitMessage,
    StartMessage,
    StopMessage,
)

from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.graphql.resolvers.subscriptions import SUBSCRIPTION_END, SubscriptionEnd
from copilot_runtime.ws.auth import CREDENTIALS_WITHDRAWN, caller_still_allowed
from copilot_runtime.ws.errors import ErrorFormattingSchema

logger = logging.getLogger(__name__)

# graphql-transport-ws's "Forbidden" (graphql-ws clients treat it as fatal: no reconnect loop).
_FORBIDDEN = 4403
# graphql-transport-ws's close for a socket that sent no connection_init in time. The legacy
# protocol has no message for it (its connection_error answers a connection_init), only the
# close, on which subscriptions-transport-ws reconnects whatever the code: the same code then.
INIT_TIMEOUT_CLOSE_CODE = 4408
INIT_TIMEOUT_REASON = "Connection initialisation timeout"


async def _credentials_withdrawn(context: Any) -> bool:
    """Whether the caller accepted at ``connection_init`` may no longer start operations."""
    extra = getattr(context, "extra", None) or {}
    caller = extra.get("caller")
    if caller is None:
        return False  # not acknowledged yet: strawberry refuses the operation itself
    return not await caller_still_allowed(caller=caller, raw_token=extra.get("token"))


class _OperationEnds:
    """The ``SubscriptionEnd`` of each live operation of one connection, by operation id."""

    def __init__(self) -> None:
        # Weak: an entry lives as long as its operation's task (whose context holds it).
        self._ends: weakref.WeakValueDictionary[str, SubscriptionEnd] = (
            weakref.WeakValueDictionary()
        )

    @contextlib.contextmanager
    def starting(self, operation_id: str) -> Iterator[None]:
        """Around the creation of an operation's task: the task inherits a fresh end."""
        end = SubscriptionEnd()
        token = SUBSCRIPTION_END.set(end)
        try:
            yield
        finally:
            SUBSCRIPTION_END.reset(token)
        self._ends[operation_id] = end

    def stopped_by_client(self, operation_id: str) -> None:
        end = self._ends.pop(operation_id, None)
        if end is not None:
            end.requested_by_client = True


class RuntimeTransportWSHandler(BaseGraphQLTransportWSHandler[Any, Any]):
    """graphql-transport-ws (npm ``graphql-ws``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.schema = ErrorFormattingSchema(self.schema)  # type: ignore[assignment]
        self.operation_ends = _OperationEnds()

    async def handle_subscribe(self, message: SubscribeMessage) -> None:
        operation_id = message["id"]
        if self.connection_acknowledged and await _credentials_withdrawn(self.context):
            await self.websocket.close(code=_FORBIDDEN, reason=CREDENTIALS_WITHDRAWN)
            return
        if operation_id in self.operations:
            # A duplicate id: the base class closes the socket (4409); the live operation's
            # end must not be replaced.
            await super().handle_subscribe(message)
            return
        with self.operation_ends.starting(operation_id):
            await super().handle_subscribe(message)

    async def handle_complete(self, message: CompleteMessage) -> None:
        self.operation_ends.stopped_by_client(message["id"])
        await super().handle_complete(message)

    @staticmethod
    def _get_pre_execution_close_reason(error: GraphQLError) -> str | None:
        return None  # every invalid document is answered with an `error` message


class RuntimeLegacyWSHandler(BaseGraphQLWSHandler[Any, Any]):
    """The legacy graphql-ws protocol (npm ``subscriptions-transport-ws``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.schema = ErrorFormattingSchema(self.schema)  # type: ignore[assignment]
        self.operation_ends = _OperationEnds()
        self.connection_init_received = False
        self.connection_timed_out = False
        self._init_timer: asyncio.Task[None] | None = None

    async def handle(self) -> None:
        self._init_timer = asyncio.create_task(self._close_unless_initialised())
        try:
            await super().handle()
        finally:
            self._init_timer.cancel()
            # Its end, without taking on its cancellation (ours still propagates).
            await asyncio.wait({self._init_timer})

    async def _close_unless_initialised(self) -> None:
        await asyncio.sleep(self.view.connection_init_wait_timeout.total_seconds())
        if self.connection_init_received:
            return
        self.connection_timed_out = True
        try:
            await self.websocket.close(code=INIT_TIMEOUT_CLOSE_CODE, reason=INIT_TIMEOUT_REASON)
        except Exception:  # the client left meanwhile: nothing left to close
            logger.debug("closing a websocket that sent no connection_init failed", exc_info=True)

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        if self.connection_timed_out:
            return  # it crossed our close on the wire: the socket is closing
        self.connection_init_received = True
        if self._init_timer is not None:
            self._init_timer.cancel()
        await super().handle_connection_init(message)

    async def handle_start(self, message: StartMessage) -> None:
        operation_id = message["id"]
        if self.connection_acknowledged and await _credentials_withdrawn(self.context):
            refusal = CopilotKitError(CREDENTIALS_WITHDRAWN, code=ErrorCode.AUTHENTICATION_ERROR)
            await self.send_message(
                {
                    "type": "error",
                    "id": operation_id,
                    "payload": {
                        "message": CREDENTIALS_WITHDRAWN,
                        "extensions": refusal.extensions(),
                    },
                }
            )
            await self.websocket.close(code=_FORBIDDEN, reason=CREDENTIALS_WITHDRAWN)
            return
        # Reusing a live id replaces that operation: the client's doing, so a stop.
        self.operation_ends.stopped_by_client(operation_id)
        with self.operation_ends.starting(operation_id):
            await super().handle_start(message)

    async def handle_stop(self, message: StopMessage) -> None:
        self.operation_ends.stopped_by_client(message["id"])
        await super().handle_stop(message)
