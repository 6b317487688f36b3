"""GraphQL over HTTP: content negotiation, JSON answers and incremental streams.

Queries answer plain JSON. Operations using ``@defer``/``@stream`` stream as
``multipart/mixed; boundary="-"`` when the client accepts it, else as SSE, else 406, as the
TypeScript runtime (graphql-yoga) does. GraphQL-level errors are HTTP 200 with ``errors``:
the CopilotKit client throws on any 4xx.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from django.http import HttpRequest, HttpResponse

from conversations.store.disk import UNAVAILABLE_MESSAGE, database_trouble_message
from copilot_runtime.auth import Caller
from copilot_runtime.errors import CopilotKitError, ErrorCode, error_extensions
from copilot_runtime.graphql import transport
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.execution import prepare_operation
from copilot_runtime.graphql.fastpath import match_fast_operation
from copilot_runtime.history import BodyRead
from copilot_runtime.http.responses import ByteStreamResponse, LastChunk, json_response

_GRAPHQL_JSON = "application/graphql-response+json; charset=utf-8"


def _json_content_type(request: HttpRequest) -> str:
    accept = request.headers.get("Accept", "")
    if "application/graphql-response+json" in accept or not accept:
        return _GRAPHQL_JSON
    return "application/json"


def graphql_json(request: HttpRequest, payload: dict[str, Any]) -> HttpResponse:
    return json_response(payload, content_type=_json_content_type(request))


def graphql_bad_request(request: HttpRequest, message: str) -> HttpResponse:
    """A request-level ``BAD_REQUEST`` error (HTTP 200, as every GraphQL error)."""
    return _request_error(request, message)


def _request_error(request: HttpRequest, message: str) -> HttpResponse:
    return graphql_json(
        request,
        {"errors": [{"message": message, "extensions": error_extensions(ErrorCode.BAD_REQUEST)}]},
    )


def database_unavailable(
    request: HttpRequest, failure: BaseException | None = None
) -> HttpResponse:
    """The answer while the database cannot be reached, or cannot write because its disk is
    full (HTTP 200, as every GraphQL error)."""
    message = UNAVAILABLE_MESSAGE if failure is None else database_trouble_message(failure)
    error = CopilotKitError(message, code=ErrorCode.NETWORK_ERROR)
    return graphql_json(
        request, {"errors": [{"message": error.message, "extensions": error.extensions()}]}
    )


def graphql_auth_error(error: CopilotKitError) -> HttpResponse:
    payload = {
        "errors": [{"message": error.message, "extensions": error.extensions()}],
        "data": None,
    }
    return json_response(payload, content_type=_GRAPHQL_JSON)


def _streaming_response(payloads: AsyncIterator[dict[str, Any]], *, mode: str) -> HttpResponse:
    if mode == "multipart":

        async def body() -> AsyncIterator[bytes]:
            # The preamble goes with the first part, the terminator with the final payload
            # (``hasNext: false``) and the answer's end: fewer writes, the same bytes.
            preamble = transport.multipart_preamble()
            ended = False
            async for payload in payloads:
                if ended:
                    continue  # nothing follows the final payload on the wire
                part = transport.multipart_part(payload)
                if preamble:
                    part, preamble = preamble + part, b""
                if payload.get("hasNext") is False:
                    ended = True
                    yield LastChunk(part + transport.multipart_end())
                else:
                    yield part
            if not ended:
                yield LastChunk(preamble + transport.multipart_end())

        content_type = transport.MULTIPART_CONTENT_TYPE
    else:

        async def body() -> AsyncIterator[bytes]:
            async for payload in payloads:
                yield transport.sse_next(payload)
            yield LastChunk(transport.sse_complete())

        content_type = transport.SSE_CONTENT_TYPE

    return ByteStreamResponse(body(), content_type=content_type)


def _negotiate_stream(request: HttpRequest) -> str | None:
    accept = request.headers.get("Accept", "")
    if transport.accepts_multipart(accept):
        return "multipart"
    if transport.accepts_sse(accept):
        return "sse"
    return None


async def serve_graphql(
    request: HttpRequest, *, body: dict[str, Any], caller: Caller, read: BodyRead | None = None
) -> HttpResponse:
    """``read``: the front door's reading of the body (its history, copilot_runtime/history)."""
    query = body.get("query")
    variables = body.get("variables")
    operation_name = body.get("operationName")
    if not isinstance(query, str):
        return _request_error(request, "'query' must be a string holding a GraphQL document.")
    if variables is not None and not isinstance(variables, dict):
        return _request_error(request, "'variables' must be a JSON object.")
    if operation_name is not None and not isinstance(operation_name, str):
        return _request_error(request, "'operationName' must be a string.")

    prepared = prepare_operation(query=query, variables=variables, operation_name=operation_name)
    if isinstance(prepared, list):
        return graphql_json(request, {"errors": prepared})
    if prepared.operation_type == "subscription":
        return _request_error(
            request, "Subscriptions are served over the websocket at /api/copilotkit."
        )

    context = RuntimeContext(
        request=request,
        user=caller.user,
        headers={name.lower(): value for name, value in request.headers.items()},
        extra={"caller": caller},
    )

    mode = None
    if prepared.is_incremental:
        mode = _negotiate_stream(request)
        if mode is None:
            response = graphql_json(
                request,
                {
                    "errors": [
                        {
                            "message": "This operation streams (@defer/@stream): accept "
                            "multipart/mixed or text/event-stream.",
                            "extensions": error_extensions(ErrorCode.BAD_REQUEST),
                        }
                    ]
                },
            )
            response.status_code = 406
            response["Accept"] = "text/event-stream; charset=utf-8, multipart/mixed"
            return response

    fast = match_fast_operation(prepared)
    if fast is not None:
        outcome = await fast(context=context, variables=variables or {}, read=read)
    else:
        outcome = await prepared.execute(context)

    if isinstance(outcome, dict):
        return graphql_json(request, outcome)
    assert mode is not None  # only incremental operations produce streams
    return _streaming_response(outcome, mode=mode)
