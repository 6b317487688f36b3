"""CORS for the runtime endpoint, with the allow-list from ``COPILOT_RUNTIME``.

Small and local on purpose: CopilotKit frontends send arbitrary custom ``x-*`` headers (from
``<CopilotKit headers>``), so a preflight must echo the requested headers back, which the
usual fixed header lists cannot express.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from asgiref.sync import markcoroutinefunction
from django.conf import settings
from django.http import HttpRequest, HttpResponse

from copilot_runtime.conf import runtime_setting
from copilot_runtime.mount import RUNTIME_PATH

logger = logging.getLogger(__name__)

RUNTIME_PATH_PREFIX = RUNTIME_PATH
_ALLOWED_METHODS = "GET, POST, PATCH, DELETE, OPTIONS"
_EXPOSED_HEADERS = "Content-Type"
_PREFLIGHT_MAX_AGE = "600"


_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
# Origins whose refused preflight was logged (once each: a page retries on every render).
_LOGGED_REFUSALS: set[str] = set()
_LOGGED_REFUSALS_LIMIT = 1000


def is_loopback_origin(origin: str) -> bool:
    try:
        parts = urlsplit(origin)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and parts.hostname in _LOOPBACK_HOSTS


def origin_listed(origin: str) -> bool:
    """Listed in ``CORS_ALLOWED_ORIGINS``, or, while DEBUG is on, a loopback origin on any
    port (the React dev server on localhost:3000 against the runtime on :8000) unless
    ``CORS_LOOPBACK_IN_DEBUG`` is off."""
    if origin in set(runtime_setting("CORS_ALLOWED_ORIGINS") or []):
        return True
    return (
        bool(settings.DEBUG)
        and bool(runtime_setting("CORS_LOOPBACK_IN_DEBUG"))
        and is_loopback_origin(origin)
    )


def allowed_origin(request: HttpRequest) -> tuple[str, bool] | None:
    """The origin to allow and whether with credentials. ``"*"`` in the list allows every
    origin, but never with credentials (cookies): only listed origins get those."""
    origin = request.headers.get("Origin")
    if not origin or not request.path.startswith(RUNTIME_PATH_PREFIX):
        return None
    if origin_listed(origin):
        return origin, True
    if "*" in (runtime_setting("CORS_ALLOWED_ORIGINS") or []):
        return origin, False
    return None


def _log_refused_preflight(request: HttpRequest) -> None:
    origin = request.headers.get("Origin")
    if not origin or not request.path.startswith(RUNTIME_PATH_PREFIX):
        return
    if origin in _LOGGED_REFUSALS or len(_LOGGED_REFUSALS) >= _LOGGED_REFUSALS_LIMIT:
        return
    _LOGGED_REFUSALS.add(origin)
    logger.warning(
        "refused the CORS preflight of %s from origin %s: it is not in "
        "COPILOT_RUNTIME['CORS_ALLOWED_ORIGINS']%s; the browser will block the request",
        request.path,
        origin,
        " (loopback origins are allowed only while DEBUG is on)"
        if is_loopback_origin(origin)
        else "",
    )


def decorate(response: HttpResponse, allowed: tuple[str, bool]) -> HttpResponse:
    origin, credentials = allowed
    response["Access-Control-Allow-Origin"] = origin
    if credentials:
        response["Access-Control-Allow-Credentials"] = "true"
    response["Access-Control-Expose-Headers"] = _EXPOSED_HEADERS
    vary = response.get("Vary")
    response["Vary"] = f"{vary}, Origin" if vary else "Origin"
    return response


def _preflight(request: HttpRequest, origin: tuple[str, bool]) -> HttpResponse:
    response = HttpResponse(status=204)
    response["Access-Control-Allow-Methods"] = _ALLOWED_METHODS
    requested = request.headers.get("Access-Control-Request-Headers")
    response["Access-Control-Allow-Headers"] = requested or "content-type, authorization"
    response["Access-Control-Max-Age"] = _PREFLIGHT_MAX_AGE
    return decorate(response, origin)


def _is_preflight(request: HttpRequest) -> bool:
    return request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers


class RuntimeCorsMiddleware:
    """Answers preflights and decorates runtime responses for allowed origins."""

    sync_capable = True
    async_capable = True

    def __init__(
        self, get_response: Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]]
    ) -> None:
        self.get_response = get_response
        self.is_async = inspect.iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse | Awaitable[HttpResponse]:
        if self.is_async:
            return self.__acall__(request)
        origin = allowed_origin(request)
        if _is_preflight(request):
            if origin:
                return _preflight(request, origin)
            _log_refused_preflight(request)
        response = self.get_response(request)
        return decorate(response, origin) if origin else response

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        origin = allowed_origin(request)
        if _is_preflight(request):
            if origin:
                return _preflight(request, origin)
            _log_refused_preflight(request)
        response = await self.get_response(request)
        return decorate(response, origin) if origin else response
