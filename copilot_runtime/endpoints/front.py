"""The two hot endpoints, served in front of Django's handler.

``POST /api/copilotkit`` with a GraphQL body (the v1 ``generateCopilotResponse``) and
``POST /api/copilotkit/agent/<id>/run`` (v2) are most of the runtime's traffic. Django's ASGI
handler and its middleware cost several milliseconds of CPU per request here (each
``MiddlewareMixin`` hook is a thread hop), more than the rest of a turn, so these two requests
are answered by this small ASGI application with the same views, the same auth rules (bearer
token, session cookie with its CSRF check, anonymous when allowed) and the same CORS answer,
and nothing else. Every other request, and any of these two that is not well-formed JSON,
goes to Django unchanged (its body replayed), so every error keeps its one owner.

The body is refused on ``Content-Length`` before it is read and read no further than the
limit otherwise; a client that stops sending a body it announced is dropped after
``BODY_READ_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

from django.core.exceptions import PermissionDenied, SuspiciousOperation
from django.core.handlers.asgi import ASGIRequest
from django.db import DatabaseError, DataError
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseForbidden,
    StreamingHttpResponse,
)

from copilot_runtime.agui import responses as agui_responses
from copilot_runtime.agui import routes, runs
from copilot_runtime.conf import runtime_setting
from copilot_runtime.endpoints.caller_cache import AuthenticationFailed, resolve_caller_cached
from copilot_runtime.endpoints.graphql_http import (
    database_unavailable,
    graphql_auth_error,
    graphql_bad_request,
    serve_graphql,
)
from copilot_runtime.endpoints.host_middleware import HonouredMiddleware, honoured_middleware
from copilot_runtime.history import V1, V2, BodyRead, read_body
from copilot_runtime.http.body import declared_length_refusal, too_large
from copilot_runtime.http.cors import allowed_origin, decorate
from copilot_runtime.http.responses import (
    REFUSED_VALUE,
    ByteStreamResponse,
    LastChunk,
    json_error,
)
from copilot_runtime.lifespan import started_if_not_yet
from copilot_runtime.mount import RUNTIME_PATH

logger = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_AGENT_PREFIX = RUNTIME_PATH + "/"
BODY_READ_TIMEOUT_SECONDS = 30.0


class _BodyRefused(Exception):
    def __init__(self, response: HttpResponse) -> None:
        self.response = response


def _hot_route(scope: Scope) -> str | None:
    """``graphql``, ``run`` or None (not ours)."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    path: str = scope["path"]
    if path in (RUNTIME_PATH, _AGENT_PREFIX):
        return "graphql"
    if path.startswith(_AGENT_PREFIX + "agent/") and path.endswith("/run"):
        return "run"
    return None


def _declared_refusal(scope: Scope) -> HttpResponse | None:
    """A runtime route's Content-Length over the limit (413) or not a number (400): answered
    here, so Django (whose ``request.body`` fails on a malformed one) never sees it."""
    if scope["type"] != "http" or not scope["path"].startswith(RUNTIME_PATH):
        return None
    declared = _header(scope, b"content-length")
    if declared is None:
        return None  # most requests (no body): not even the setting is read
    refused = declared_length_refusal(declared, int(runtime_setting("MAX_BODY_BYTES")))
    return refused.response() if refused is not None else None


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    refused = declared_length_refusal(_header(scope, b"content-length"), limit)
    if refused is not None:
        raise _BodyRefused(refused.response())
    chunks: list[bytes] = []
    size = 0
    while True:
        # Not wait_for: it would wrap each receive in a task of its own.
        async with asyncio.timeout(BODY_READ_TIMEOUT_SECONDS):
            message = await receive()
        if message["type"] == "http.disconnect":
            raise asyncio.CancelledError
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _BodyRefused(_too_large(limit))
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _too_large(limit: int) -> HttpResponse:
    return too_large(limit).response()


def _replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields the already-read body first, then the real one's messages."""
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class RuntimeFront:
    """ASGI middleware: the hot endpoints here, everything else to ``app`` (Django).

    The project's middleware is honoured, replaced or not needed on the hot endpoints as
    ``host_middleware.py`` decides; ``HOT_PATHS_THROUGH_DJANGO`` sends them to Django too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._through_django = bool(runtime_setting("HOT_PATHS_THROUGH_DJANGO"))
        self._middleware: HonouredMiddleware | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            started_if_not_yet()  # for servers without lifespan events (daphne)
        route = None if self._through_django else _hot_route(scope)
        if route is None:
            refused = _declared_refusal(scope)
            if refused is not None:
                # Any runtime route: refused before a byte of the body is read.
                await _send_response(refused, send, scope=scope)
                return
            await self.app(scope, receive, send)
            return
        limit = int(runtime_setting("MAX_BODY_BYTES"))
        try:
            body = await _read_body(scope, receive, limit)
        except _BodyRefused as refused:
            await _send_response(refused.response, send, scope=scope)
            return
        except (TimeoutError, asyncio.CancelledError):
            return  # the client never sent its body, or left: nothing to answer
        # Its history recognised in its bytes (copilot_runtime/history), before they are parsed.
        read = read_body(V1 if route == "graphql" else V2, body)
        if read is None or (route == "graphql" and not isinstance(read.value.get("query"), str)):
            # Not the hot path's business (an envelope, bad JSON...): Django answers it.
            await self.app(scope, _replaying(body, receive), send)
            return
        # The hot path reads the parsed body, never the request's stream; neither the body nor
        # its parse is held while the answer streams (50 conversations' histories otherwise).
        request = ASGIRequest(scope, io.BytesIO(b""))
        del body
        middleware = self._middleware
        if middleware is None:  # built on first use: the settings are loaded by then
            middleware = self._middleware = honoured_middleware()
        refused = _before(middleware, request)
        response = refused if refused is not None else await _answer(request, route, read)
        del read
        response = middleware.after(request, response)
        await _send_response(response, send, scope=scope, receive=receive, request=request)


def _before(middleware: HonouredMiddleware, request: HttpRequest) -> HttpResponse | None:
    """The honoured middleware's request hooks, their refusals answered as Django's handler
    answers them (a host not in ``ALLOWED_HOSTS``: 400; a disallowed user agent: 403)."""
    try:
        return middleware.before(request)
    except SuspiciousOperation as refused:
        logger.warning("refused %s: %s", request.path, refused)
        return HttpResponseBadRequest()
    except PermissionDenied:
        return HttpResponseForbidden()


async def _answer(request: HttpRequest, route: str, read: BodyRead) -> HttpResponse:
    try:
        return await _respond(request, route, read)
    except Exception:
        logger.exception("serving %s failed", request.path)
        return (
            database_unavailable(request)
            if route == "graphql"
            else json_error(500, "internal_error", "The runtime failed to answer this request.")
        )


async def _respond(request: HttpRequest, route: str, read: BodyRead) -> HttpResponse:
    body = read.value
    try:
        try:
            # Inside the database guard below: resolving a caller may read the database.
            caller = await resolve_caller_cached(request)
        except AuthenticationFailed as refused:
            if route == "graphql":
                return graphql_auth_error(refused)
            return agui_responses.unauthorized(refused.message)
        if route == "graphql":
            return await serve_graphql(request, body=body, caller=caller, read=read)
        matched = routes.match_route(_raw_subpath(request))
        if matched is None or matched.method != routes.AGENT_RUN:
            return agui_responses.not_found()
        return await runs.handle_run(
            request=request, caller=caller, agent_id=matched.agent_id or "", body=body, read=read
        )
    except DataError as exc:
        # A value the database refused is the caller's mistake, not an outage.
        logger.warning("the database refused a value of %s: %s", request.path, exc)
        return _refused_value(route, request)
    except DatabaseError as exc:
        # The database down or saturated: the protocol's own error, never a 500 page.
        logger.exception("database unavailable while serving %s", request.path)
        if route == "graphql":
            return database_unavailable(request, exc)
        return agui_responses.database_unavailable(exc)


def _refused_value(route: str, request: HttpRequest) -> HttpResponse:
    if route == "graphql":
        return graphql_bad_request(request, REFUSED_VALUE)
    return agui_responses.invalid_request(REFUSED_VALUE)


def _raw_subpath(request: HttpRequest) -> str:
    raw = request.scope.get("raw_path") or request.path.encode()  # type: ignore[attr-defined]
    path = raw.decode("latin-1")
    return path[path.find(_AGENT_PREFIX) + len(_AGENT_PREFIX) :]


async def _send_response(
    response: HttpResponse,
    send: Send,
    *,
    scope: Scope,
    receive: Receive | None = None,
    request: HttpRequest | None = None,
) -> None:
    if request is None:
        request = ASGIRequest(scope, io.BytesIO(b""))
    origin = allowed_origin(request)
    if origin is not None:
        decorate(response, origin)
    headers = [
        (name.encode("latin-1"), value.encode("latin-1")) for name, value in response.items()
    ]
    for cookie in response.cookies.values():
        headers.append((b"set-cookie", cookie.output(header="").strip().encode("latin-1")))
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    if isinstance(response, ByteStreamResponse):
        # The v1 and v2 streams: their chunks are bytes already, sent as they are.
        await _stream(response, response.chunks, send, receive)
    elif isinstance(response, StreamingHttpResponse):
        await _stream(response, response.streaming_content, send, receive)
    else:
        await send({"type": "http.response.body", "body": response.content})


async def _stream(
    response: StreamingHttpResponse,
    chunks: AsyncIterable[bytes],
    send: Send,
    receive: Receive | None,
) -> None:
    """Send the streaming body; a client that leaves cancels the stream (its generator's
    ``finally`` then applies the protocol's disconnect policy), as Django's handler does.

    A ``LastChunk`` ends the answer with it (one write instead of two); the stream still runs
    to its end (its own ``finally``), and nothing it yields after is sent.

    The body is sent from this task, and a watcher task cancels it when the client leaves
    first: one task per answer, where a sender task of its own and ``asyncio.wait`` on both
    cost a task, a future and their callbacks more."""
    ended = False

    async def body() -> None:
        nonlocal ended
        async for chunk in chunks:
            if ended:
                continue
            ended = type(chunk) is LastChunk
            await send({"type": "http.response.body", "body": chunk, "more_body": not ended})
        if not ended:
            ended = True
            await send({"type": "http.response.body", "body": b""})

    if receive is None:
        await body()
        return

    streaming = asyncio.current_task()
    assert streaming is not None
    left = False

    async def watch_disconnect() -> None:
        nonlocal left
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                # Once the answer is whole, the server reports its end as a disconnect: the
                # stream's own ending is then not cut short.
                if not ended:
                    left = True
                    streaming.cancel()
                return

    watcher = asyncio.create_task(watch_disconnect())
    try:
        await body()
    except asyncio.CancelledError:
        # Cancelled for the client that left: this request ends here, quietly. Any other
        # cancellation (the server stopping) goes on.
        if not left or streaming.cancelling() > 1:
            raise
    except OSError:
        pass  # the connection broke under a write: nobody is left to answer
    finally:
        if not watcher.done():
            watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        if left:
            streaming.uncancel()
        _release(response)


def _release(response: HttpResponse) -> None:
    """What ``HttpResponse.close`` does, minus its ``request_finished`` signal: that signal is
    Django's handler's business (it closes the calling thread's database connections, and
    this thread holds none), and sending it cost a few percent of every request."""
    for closer in response._resource_closers:  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):
            closer()
    response._resource_closers.clear()  # type: ignore[attr-defined]
    response.closed = True
