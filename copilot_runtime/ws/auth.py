"""Who is on the other end of a websocket: a bearer token, the Django session, or nobody.

A token may come in ``connection_init``'s payload (``{"authorization": "Bearer <token>"}`` or
``{"token": "<token>"}``, keys in any case), which is what browser clients can send, or in the
handshake's ``Authorization`` header (server-side clients). A token, when present, decides:
an unknown or revoked one refuses the connection even if a session cookie came along. Without
one, the session (from Channels' ``AuthMiddlewareStack``) is used, then anonymous access as
``COPILOT_RUNTIME["ALLOW_ANONYMOUS"]`` allows.

Refusal reasons are short: graphql-transport-ws sends them as a close reason (123 bytes at most).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser

from conversations.store.health import db_sync_to_async
from copilot_runtime.auth import Caller, token_user
from copilot_runtime.conf import anonymous_allowed

TOKEN_REFUSED = "Forbidden: the bearer token is unknown or revoked"
MALFORMED_AUTHORIZATION = "Forbidden: send authorization as 'Bearer <token>'"
AUTHENTICATION_REQUIRED = "Forbidden: authentication required (log in or send a bearer token)"
CREDENTIALS_WITHDRAWN = "Forbidden: the token was revoked or the user deactivated"


class ConnectionRefused(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _param(params: Mapping[str, Any], name: str) -> Any:
    for key, value in params.items():
        if isinstance(key, str) and key.lower() == name:
            return value
    return None


def _bearer_value(authorization: object) -> str:
    if not isinstance(authorization, str):
        raise ConnectionRefused(MALFORMED_AUTHORIZATION)
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise ConnectionRefused(MALFORMED_AUTHORIZATION)
    return value.strip()


def connection_token(*, params: Mapping[str, Any] | None, headers: Mapping[str, str]) -> str | None:
    """The bearer token the client sent, if any; raises ConnectionRefused when malformed."""
    params = params or {}
    authorization = _param(params, "authorization")
    if authorization is not None:
        return _bearer_value(authorization)
    token = _param(params, "token")
    if token is not None:
        if not isinstance(token, str) or not token.strip():
            raise ConnectionRefused(MALFORMED_AUTHORIZATION)
        return token.strip()
    if "authorization" in headers:
        return _bearer_value(headers["authorization"])
    return None


async def connection_caller(
    *, params: Mapping[str, Any] | None, headers: Mapping[str, str], session_user: Any
) -> Caller:
    """The caller of a websocket connection; raises ConnectionRefused with the reason."""
    raw_token = connection_token(params=params, headers=headers)
    if raw_token is not None:
        user = await db_sync_to_async(token_user)(raw_token)
        if user is None:
            raise ConnectionRefused(TOKEN_REFUSED)
        return Caller(user=user, via="token")
    if session_user is not None and session_user.is_authenticated:
        return Caller(user=session_user, via="session")
    if not anonymous_allowed():
        raise ConnectionRefused(AUTHENTICATION_REQUIRED)
    return Caller(user=AnonymousUser(), via="anonymous")


def _user_is_active(pk: Any) -> bool:
    return get_user_model().objects.filter(pk=pk, is_active=True).exists()


async def caller_still_allowed(*, caller: Caller, raw_token: str | None) -> bool:
    """Whether a connection's caller may still start operations.

    Checked before each operation (one indexed query), because a socket outlives the
    credentials it was opened with: a token revoked or a user deactivated after
    ``connection_init`` must not start runs on the already-open socket.
    """
    if caller.via == "token":
        return raw_token is not None and await db_sync_to_async(token_user)(raw_token) is not None
    if caller.via == "session":
        return await db_sync_to_async(_user_is_active)(caller.user.pk)
    return True
