"""The v2 entry points: the REST sub-paths of ``/api/copilotkit`` and the single-route envelope.

``copilot_runtime.endpoints.runtime`` hands over every sub-path (``serve_subpath``) and every POST
whose JSON body has ``method`` (``serve_envelope``). Views stay thin: route, method, caller,
body, then one handler in ``runs``, ``threads`` or ``info``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

import orjson
from django.db import DatabaseError, DataError
from django.http import HttpRequest, HttpResponse

from agents.remote.announced import announced_agents_refresh
from conversations.store.health import db_sync_to_async
from copilot_runtime.agui import responses, routes, runs, threads
from copilot_runtime.agui.info import runtime_info
from copilot_runtime.auth import AuthenticationFailed, Caller, resolve_caller
from copilot_runtime.http.asgi_only import asgi_required, streams_over_wsgi
from copilot_runtime.http.body import BodyRefusal, read_json_body, request_length_refusal
from copilot_runtime.http.responses import REFUSED_VALUE, json_response
from copilot_runtime.mount import RUNTIME_PATH

logger = logging.getLogger(__name__)

RUNTIME_PREFIX = RUNTIME_PATH + "/"
_BODY_ROUTES = frozenset({routes.AGENT_RUN, routes.AGENT_CONNECT, routes.AGENT_SUGGEST})
ENVELOPE_NOT_JSON = "Single-route endpoint expects JSON payloads"
ENVELOPE_INVALID_JSON = "Invalid JSON payload"
RESOURCE_REQUEST = "resource/request"
ENVELOPE_METHODS = frozenset(
    {
        "agent/run",
        "agent/connect",
        "agent/stop",
        "agent/suggest",
        "info",
        "transcribe",
        RESOURCE_REQUEST,
    }
)
# What ``resource/request`` may reach: the thread routes (the TypeScript runtime's
# ``isSingleRouteResourceRoute``), never an agent route or anything outside the runtime.
_RESOURCE_ROUTES = frozenset(
    {
        routes.THREADS_LIST,
        routes.THREAD_MESSAGES,
        routes.THREAD_STATE,
        routes.THREAD_EVENTS,
        routes.THREAD_ARCHIVE,
        routes.THREAD_UPDATE,
    }
)


def _raw_subpath(request: HttpRequest, subpath: str) -> str:
    """The sub-path still percent-encoded, so an agent or thread id may contain ``/``."""
    scope = getattr(request, "scope", None)
    raw = scope.get("raw_path") if isinstance(scope, dict) else None
    if raw:
        path = raw.decode("latin-1")
        index = path.find(RUNTIME_PREFIX)
        if index >= 0:
            return path[index + len(RUNTIME_PREFIX) :]
    return "/".join(quote(segment, safe="") for segment in subpath.split("/"))


def _lenient_json(request: HttpRequest) -> Any:
    """An optional JSON body (``stop`` sends ``{runId}`` only when it knows the run)."""
    raw = request.body
    if not raw.strip():
        return {}
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}


async def _with_caller(
    request: HttpRequest, handle: Callable[[Caller], Awaitable[HttpResponse]]
) -> HttpResponse:
    try:
        # Resolving the caller reads the database too: inside the guard, so an exhausted pool
        # answers the protocol's 503, not Django's HTML error page.
        caller = await resolve_caller(request)
        return await handle(caller)
    except AuthenticationFailed as refused:
        return responses.unauthorized(refused.message)
    except DataError as exc:
        # A value the database refused (a NUL in an id...): the caller's mistake, not an outage.
        logger.warning("the database refused a value of %s: %s", request.path, exc)
        return responses.invalid_request(REFUSED_VALUE)
    except DatabaseError as exc:
        logger.exception("database unavailable while serving %s", request.path)
        return responses.database_unavailable(exc)


def _body_refused(refusal: BodyRefusal) -> HttpResponse:
    """A REST route's unreadable body: TypeScript's ``Invalid request body`` with the reason in
    ``details`` (413 keeps its own status: the body was never read)."""
    if refusal.status == 413:
        return refusal.response()
    return responses.invalid_body(refusal.message)


def envelope_not_json() -> HttpResponse:
    """A body not declared as JSON on the shared URL: the TypeScript single route's 415, byte
    for byte (it checks the content type before reading a byte of the body)."""
    return responses.invalid_request(ENVELOPE_NOT_JSON, status=415)


def envelope_body_refused(refusal: BodyRefusal) -> HttpResponse:
    """The shared URL's unreadable body, in the single-route envelope's words (a GraphQL
    client always sends JSON), with the runtime's own explanation in ``details``."""
    if refusal.status == 413:
        return refusal.response()
    if refusal.status == 415:
        return envelope_not_json()
    return responses.invalid_request(ENVELOPE_INVALID_JSON, details=refusal.message)


async def serve_subpath(request: HttpRequest, subpath: str) -> HttpResponse:
    route = routes.match_route(_raw_subpath(request, subpath))
    if route is None:
        return responses.not_found()
    if request.method not in route.allowed_methods:
        return responses.method_not_allowed(route.allowed_methods)
    body: Any = None
    if route.method in _BODY_ROUTES or (
        route.method == routes.THREAD_UPDATE and request.method == "PATCH"
    ):
        parsed = read_json_body(request)
        if isinstance(parsed, BodyRefusal):
            return _body_refused(parsed)
        body = parsed.value
    elif route.method == routes.AGENT_STOP:
        refused = request_length_refusal(request)
        if refused is not None:
            return _body_refused(refused)
        body = _lenient_json(request)

    async def handle(caller: Caller) -> HttpResponse:
        return await _dispatch(request, route, caller, body, single_route=False)

    return await _with_caller(request, handle)


async def _dispatch(
    request: HttpRequest,
    route: routes.Route,
    caller: Caller,
    body: Any,
    *,
    single_route: bool,
    resource: Resource | None = None,
) -> HttpResponse:
    method = route.method
    if streams_over_wsgi(request, streaming=method in _BODY_ROUTES):
        return asgi_required()
    if method == routes.INFO:
        await announced_agents_refresh()
        return json_response(runtime_info(single_route=single_route))
    if method == routes.AGENT_RUN:
        return await runs.handle_run(
            request=request, caller=caller, agent_id=route.agent_id or "", body=body
        )
    if method == routes.AGENT_CONNECT:
        return await runs.handle_connect(caller=caller, agent_id=route.agent_id or "", body=body)
    if method == routes.AGENT_STOP:
        return await runs.handle_stop(
            caller=caller,
            agent_id=route.agent_id or "",
            thread_id=route.thread_id or "",
            body=body,
        )
    if method == routes.AGENT_SUGGEST:
        return await runs.handle_suggest(caller=caller, agent_id=route.agent_id or "", body=body)
    return await _serve_thread_route(resource or Resource.of(request), route, caller, body)


@dataclass(frozen=True)
class Resource:
    """A thread route's HTTP method and query: the request's own on the REST paths, the
    envelope's ``httpMethod`` and path query on ``resource/request``."""

    http_method: str
    query: Mapping[str, str]

    @classmethod
    def of(cls, request: HttpRequest) -> Resource:
        return cls(http_method=request.method or "GET", query=request.GET.dict())


async def _serve_thread_route(
    resource: Resource, route: routes.Route, caller: Caller, body: Any
) -> HttpResponse:
    user = caller.user
    query = resource.query
    thread_id = route.thread_id or ""
    try:
        if route.method == routes.THREADS_LIST:
            page = await db_sync_to_async(threads.threads_list)(
                user=user,
                agent_id=query.get("agentId") or None,
                include_archived=query.get("includeArchived") == "true",
                limit=query.get("limit"),
                cursor=query.get("cursor"),
            )
            return json_response({"threads": page.threads, "nextCursor": page.next_cursor})
        if route.method == routes.THREAD_MESSAGES:
            messages = await db_sync_to_async(threads.thread_messages)(
                user=user, thread_id=thread_id
            )
            return json_response({"messages": messages})
        if route.method == routes.THREAD_STATE:
            state = await db_sync_to_async(threads.thread_state)(
                user=user, thread_id=thread_id, agent_id=query.get("agentId") or None
            )
            return json_response({"state": state})
        if route.method == routes.THREAD_EVENTS:
            events = await db_sync_to_async(threads.thread_events)(user=user, thread_id=thread_id)
            return json_response({"events": events})
        if route.method == routes.THREAD_ARCHIVE:
            if not await db_sync_to_async(threads.thread_archive)(user=user, thread_id=thread_id):
                return responses.thread_not_found(thread_id)
            return json_response({"threadId": thread_id, "archived": True})
        if resource.http_method == "DELETE":
            if not await db_sync_to_async(threads.thread_delete)(user=user, thread_id=thread_id):
                return responses.thread_not_found(thread_id)
            return json_response({"threadId": thread_id, "deleted": True})
        thread = await db_sync_to_async(threads.thread_update)(
            user=user, thread_id=thread_id, changes=body
        )
        if thread is None:
            return responses.thread_not_found(thread_id)
        return json_response(threads.thread_as_json(thread))
    except threads.ThreadRequestError as invalid:
        return json_response({"error": str(invalid)}, status=400)
    except threads.ThreadIsBusy:
        return json_response(
            {
                "error": "Thread busy",
                "code": "THREAD_BUSY",
                "message": f"Thread '{thread_id}' has a run in progress; stop it first.",
            },
            status=409,
        )


# --- the single-route envelope ----------------------------------------------------------------


def _param(params: Any, key: str) -> str | None:
    value = params.get(key) if isinstance(params, dict) else None
    return value if isinstance(value, str) and value.strip() else None


@dataclass(frozen=True)
class _ResourceCall:
    route: routes.Route
    resource: Resource


def _resource_call(params: Any) -> _ResourceCall | HttpResponse:
    """``{path: "/threads/t-1/messages?x=1", httpMethod: "GET"}`` -> the thread route."""
    path = _param(params, "path")
    if path is None:
        return responses.invalid_request("Missing or invalid parameter 'path'")
    http_method = _param(params, "httpMethod")
    if http_method is None:
        return responses.invalid_request("Missing or invalid parameter 'httpMethod'")
    if not path.startswith("/") or path.startswith("//"):
        return responses.invalid_request("Resource path must be Runtime-relative")
    parts = urlsplit(path)
    route = routes.match_route(parts.path)
    if route is None or route.method not in _RESOURCE_ROUTES:
        return responses.not_found()
    http_method = http_method.upper()
    if http_method not in route.allowed_methods:
        return responses.method_not_allowed(route.allowed_methods)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return _ResourceCall(route=route, resource=Resource(http_method=http_method, query=query))


def _envelope_route(envelope: dict[str, Any]) -> routes.Route | _ResourceCall | HttpResponse:
    method = envelope.get("method")
    if not isinstance(method, str) or not method:
        return responses.invalid_request("Missing method field")
    if method not in ENVELOPE_METHODS:
        return responses.invalid_request(f"Unsupported method '{method}'")
    if method == "info":
        return routes.Route(routes.INFO)
    if method == "transcribe":
        return json_response(
            {"error": "service_not_configured", "message": "No transcription service is set up."},
            status=503,
        )
    params = envelope.get("params")
    if method == RESOURCE_REQUEST:
        return _resource_call(params)
    agent_id = _param(params, "agentId")
    if agent_id is None:
        return responses.invalid_request("Missing or invalid parameter 'agentId'")
    if method == "agent/stop":
        thread_id = _param(params, "threadId")
        if thread_id is None:
            return responses.invalid_request("Missing or invalid parameter 'threadId'")
        return routes.Route(routes.AGENT_STOP, agent_id=agent_id, thread_id=thread_id)
    if envelope.get("body") is None:
        return responses.invalid_request("Missing request body for JSON handler")
    return routes.Route(method, agent_id=agent_id)


async def serve_envelope(request: HttpRequest, envelope: dict[str, Any]) -> HttpResponse:
    """A POST to ``/api/copilotkit`` whose JSON body is ``{method, params?, body?}``."""
    target = _envelope_route(envelope)
    if isinstance(target, HttpResponse):
        return target
    body = envelope.get("body")
    resource: Resource | None = None
    if isinstance(target, _ResourceCall):
        route, resource = target.route, target.resource
    else:
        route = target
    if route.method == routes.AGENT_STOP and not isinstance(body, dict):
        body = {}

    async def handle(caller: Caller) -> HttpResponse:
        return await _dispatch(request, route, caller, body, single_route=True, resource=resource)

    return await _with_caller(request, handle)
