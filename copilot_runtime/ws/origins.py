"""Which browser origins may open the runtime's websocket (the defence against cross-site
websocket hijacking: browsers apply no CORS to websocket handshakes and send the user's cookies).

- no ``Origin`` header (not a browser) and same-origin pages: allowed;
- origins listed in ``COPILOT_RUNTIME["CORS_ALLOWED_ORIGINS"]``: allowed;
- ``"*"`` in that list: any other origin is allowed *without credentials*, as for HTTP CORS (the
  session cookie is removed from the handshake, so only a bearer token can authenticate it);
- anything else: refused before the socket opens (the client sees HTTP 403).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier

from copilot_runtime.conf import runtime_setting
from copilot_runtime.http.cors import origin_listed

logger = logging.getLogger(__name__)

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


class OriginDecision(enum.Enum):
    ALLOW = "allow"
    ALLOW_WITHOUT_CREDENTIALS = "allow_without_credentials"
    DENY = "deny"


def normalized_origin(origin: str) -> str | None:
    """``scheme://host[:port]`` lower-cased, without a default port; None if not an origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:  # IPv6: urlsplit dropped the brackets
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{port}"
    return f"{scheme}://{host}"


def _is_same_origin(origin: str, host_header: str | None) -> bool:
    """Whether ``origin`` names the host the handshake was sent to (its ``Host`` header)."""
    if not host_header:
        return False
    normalized = normalized_origin(origin)
    if normalized is None:
        return False
    scheme, _, origin_host = normalized.partition("://")
    try:
        requested = urlsplit(f"{scheme}://{host_header.strip()}")
        requested_port = requested.port
    except ValueError:
        return False
    if not requested.hostname:
        return False
    host = requested.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    if requested_port is not None and requested_port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{requested_port}"
    return host == origin_host


def origin_decision(*, origin: str | None, host: str | None) -> OriginDecision:
    if origin is None or _is_same_origin(origin, host):
        return OriginDecision.ALLOW
    allowed = runtime_setting("CORS_ALLOWED_ORIGINS") or []
    normalized = normalized_origin(origin)
    listed = {normalized_origin(entry) for entry in allowed if entry != "*"}
    if normalized is not None and (normalized in listed or origin_listed(normalized)):
        return OriginDecision.ALLOW
    if "*" in allowed:
        return OriginDecision.ALLOW_WITHOUT_CREDENTIALS
    return OriginDecision.DENY


def scope_headers(scope: Mapping[str, Any]) -> dict[str, str]:
    """The handshake's headers by lower-case name (the last one wins, as in Django)."""
    return {
        name.decode("latin1").lower(): value.decode("latin1")
        for name, value in scope.get("headers", [])
    }


def _without_cookies(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    return [(name, value) for name, value in headers if name.lower() != b"cookie"]


class RuntimeOriginValidator:
    """ASGI middleware for the websocket scope: applies ``origin_decision`` to the handshake."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "websocket":
            return await self.application(scope, receive, send)
        headers = scope_headers(scope)
        origin = headers.get("origin")
        decision = origin_decision(origin=origin, host=headers.get("host"))
        if decision is OriginDecision.DENY:
            logger.warning(
                "refused a websocket from origin %r to host %r: not same-origin and not in "
                "COPILOT_RUNTIME['CORS_ALLOWED_ORIGINS']",
                origin,
                headers.get("host"),
            )
            return await WebsocketDenier()(scope, receive, send)
        if decision is OriginDecision.ALLOW_WITHOUT_CREDENTIALS:
            scope = {**scope, "headers": _without_cookies(scope.get("headers", []))}
        return await self.application(scope, receive, send)
