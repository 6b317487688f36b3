"""``/api/copilotkit``: one URL for both CopilotKit protocols.

A POST whose JSON body has ``query`` is GraphQL (v1); one with ``method`` is the v2
single-route envelope; JSON with neither is a 400, a body not declared as JSON a 415 (both
in the envelope's error shape, as the TypeScript runtime answers on its single route; a
text/plain body is still read as GraphQL when it is JSON, as ``fetch()`` without headers
sends it). Sub-paths (``/info``, ``/agent/...``, ``/threads...``) are the v2 REST routes.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, DataError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from copilot_runtime.agui import views as agui_views
from copilot_runtime.auth import AuthenticationFailed, resolve_caller
from copilot_runtime.endpoints.graphql_http import (
    database_unavailable,
    graphql_auth_error,
    graphql_bad_request,
    serve_graphql,
)
from copilot_runtime.http.asgi_only import asgi_required, streams_over_wsgi
from copilot_runtime.http.body import BodyRefusal, read_json_body
from copilot_runtime.http.responses import REFUSED_VALUE, json_error

logger = logging.getLogger(__name__)


@csrf_exempt
async def copilotkit_endpoint(request: HttpRequest) -> HttpResponse:
    try:
        return await _dispatch(request)
    except DataError as exc:
        # A value the database refused is the caller's mistake, not an outage.
        logger.warning("the database refused a value of %s: %s", request.path, exc)
        return graphql_bad_request(request, REFUSED_VALUE)
    except DatabaseError as exc:
        # Postgres down or unreachable: say so in the protocol's shape, never a 500 page.
        logger.exception("database unavailable while serving /api/copilotkit")
        return database_unavailable(request, exc)


async def _dispatch(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        response = json_error(405, "Method not allowed")
        response["Allow"] = "POST"
        return response

    parsed = read_json_body(request)
    if isinstance(parsed, BodyRefusal):
        return agui_views.envelope_body_refused(parsed)
    body = parsed.value
    is_graphql = isinstance(body, dict) and "query" in body
    if not parsed.declared_json and not is_graphql:
        # GraphQL is tolerated as text/plain; the envelope, as on the TypeScript runtime's
        # single route, is JSON only.
        return agui_views.envelope_not_json()
    if not isinstance(body, dict) or not ({"query", "method"} & body.keys()):
        return json_error(
            400,
            "invalid_request",
            "Expected a JSON object with 'query' (GraphQL) or 'method' (single-route envelope).",
        )

    if is_graphql:
        if streams_over_wsgi(request, streaming="generateCopilotResponse" in str(body["query"])):
            return asgi_required()
        try:
            caller = await resolve_caller(request)
        except AuthenticationFailed as exc:
            return graphql_auth_error(exc)
        return await serve_graphql(request, body=body, caller=caller)

    return await agui_views.serve_envelope(request, body)


@csrf_exempt
async def copilotkit_subpath(request: HttpRequest, subpath: str) -> HttpResponse:
    return await agui_views.serve_subpath(request, subpath)
