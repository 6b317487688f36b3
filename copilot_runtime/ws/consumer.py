"""The websocket consumer: strawberry's ``GraphQLWSConsumer`` with the runtime's context, auth
and handlers.

Auth happens at ``connection_init`` (``on_ws_connect``): a refused caller gets the protocol's
refusal with the reason, close code 4403 on graphql-transport-ws, a ``connection_error``
message (``{"message", "extensions"}``) on the legacy graphql-ws protocol. Operations are only
accepted after ``connection_ack``, so none runs for a refused caller.

A socket that sends no ``connection_init`` within ``WEBSOCKET_INIT_TIMEOUT_SECONDS`` is closed
with 4408 (strawberry's timer on graphql-transport-ws, ``handlers`` on the legacy protocol);
``limits`` counts the socket as initialised once it is acknowledged.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib.auth.models import AnonymousUser
from strawberry.channels import GraphQLWSConsumer
from strawberry.exceptions import ConnectionRejectionError
from strawberry.types.unset import UNSET, UnsetType

from copilot_runtime.conf import runtime_setting
from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.ws.auth import ConnectionRefused, connection_caller, connection_token
from copilot_runtime.ws.context import SocketContext
from copilot_runtime.ws.handlers import RuntimeLegacyWSHandler, RuntimeTransportWSHandler
from copilot_runtime.ws.limits import mark_initialised
from copilot_runtime.ws.origins import OriginDecision, origin_decision, scope_headers

# graphql-transport-ws's "Forbidden" close code, sent by strawberry on a refused connection.
FORBIDDEN_CLOSE_CODE = 4403
# What strawberry's legacy graphql-ws handler closes with after a connection_error (1011) and
# on a non-text message (1002). Servers built on autobahn (daphne) refuse to send close codes
# other than 1000 and 3000-4999 (they raise instead), so these are sent as 4403 and 4400.
_LEGACY_INTERNAL_ERROR = 1011
_LEGACY_PROTOCOL_ERROR = 1002
BAD_REQUEST_CLOSE_CODE = 4400
SERVER_ERROR_CLOSE_CODE = 4500
# A websocket close reason is at most 123 bytes of UTF-8.
MAX_CLOSE_REASON_BYTES = 123


def _close_reason(reason: str) -> str:
    encoded = reason.encode()[:MAX_CLOSE_REASON_BYTES]
    return encoded.decode(errors="ignore")


class RuntimeGraphQLWSConsumer(GraphQLWSConsumer):
    graphql_transport_ws_handler_class = RuntimeTransportWSHandler  # type: ignore[assignment]
    graphql_ws_handler_class = RuntimeLegacyWSHandler  # type: ignore[assignment]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.refusal_reason: str | None = None
        # Read per connection (not at import, when the route is built), so the setting and
        # its overrides apply; both protocol handlers wait this long for connection_init.
        self.connection_init_wait_timeout = dt.timedelta(
            seconds=runtime_setting("WEBSOCKET_INIT_TIMEOUT_SECONDS")
        )

    async def get_context(self, request: Any, response: Any) -> SocketContext:  # type: ignore[override]
        session_user = self.scope.get("user")
        headers = scope_headers(self.scope)
        return SocketContext(
            request=None,
            # Until connection_init says otherwise (a token), the session's user if any.
            user=session_user
            if session_user is not None and session_user.is_authenticated
            else AnonymousUser(),
            headers=headers,
            extra={"ws": self},
        )

    async def on_ws_connect(self, context: SocketContext) -> UnsetType | dict[str, object] | None:  # type: ignore[override]
        try:
            caller = await connection_caller(
                params=context.connection_params,
                headers=context.headers,
                session_user=self.scope.get("user"),
            )
        except ConnectionRefused as refused:
            self.refusal_reason = refused.reason
            error = CopilotKitError(refused.reason, code=ErrorCode.AUTHENTICATION_ERROR)
            raise ConnectionRejectionError(
                {"message": refused.reason, "extensions": error.extensions()}
            ) from refused
        context.user = caller.user
        context.extra["caller"] = caller
        # Kept to re-check the token before each operation (ws.handlers).
        context.extra["token"] = connection_token(
            params=context.connection_params, headers=context.headers
        )
        # Acknowledged next: the socket no longer counts against WEBSOCKET_MAX_PENDING_INIT.
        mark_initialised(self.scope)
        return UNSET

    def is_websocket_origin_allowed(self, request: Any, origin: str) -> bool:
        # Checked again here (strawberry asks for cross-origin handshakes), with the same rule
        # as the origin middleware in front of this consumer.
        headers = scope_headers(self.scope)
        decision = origin_decision(origin=origin, host=headers.get("host"))
        return decision is not OriginDecision.DENY

    async def close(self, code: int | None = None, reason: str | None = None) -> None:
        if self.refusal_reason and code in (FORBIDDEN_CLOSE_CODE, _LEGACY_INTERNAL_ERROR):
            # A refused caller: strawberry says only "Forbidden" (or nothing); say why.
            code, reason = FORBIDDEN_CLOSE_CODE, _close_reason(self.refusal_reason)
        elif code == _LEGACY_PROTOCOL_ERROR:
            code = BAD_REQUEST_CLOSE_CODE
        elif code is not None and not _sendable_close_code(code):
            code = SERVER_ERROR_CLOSE_CODE
        await super().close(code=code, reason=reason)


def _sendable_close_code(code: int) -> bool:
    return code == 1000 or 3000 <= code <= 4999
