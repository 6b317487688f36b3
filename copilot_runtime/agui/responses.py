"""The v2 answers outside the event stream, in the TypeScript runtime's JSON shapes, and the
SSE response itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

from django.http import HttpResponse

from conversations.store.disk import UNAVAILABLE_MESSAGE, database_trouble_message
from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.http.responses import ByteStreamResponse, json_response

SSE_CONTENT_TYPE = "text/event-stream"


def not_found() -> HttpResponse:
    return json_response({"error": "Not found"}, status=404)


def method_not_allowed(allowed: Iterable[str]) -> HttpResponse:
    return json_response(
        {"error": "Method not allowed"}, status=405, headers={"Allow": ", ".join(allowed)}
    )


def agent_not_found(agent_id: str) -> HttpResponse:
    return json_response(
        {"error": "Agent not found", "message": f"Agent '{agent_id}' does not exist"}, status=404
    )


def invalid_body(details: str) -> HttpResponse:
    return json_response({"error": "Invalid request body", "details": details}, status=400)


def invalid_request(message: str, *, status: int = 400, details: str = "") -> HttpResponse:
    """The single-route envelope's refusals (``single-route-helpers.ts``); ``details`` adds
    the runtime's own, more specific explanation."""
    payload = {"error": "invalid_request", "message": message}
    if details:
        payload["details"] = details
    return json_response(payload, status=status)


def thread_not_found(thread_id: str) -> HttpResponse:
    return json_response(
        {"error": "Thread not found", "message": f"Thread '{thread_id}' does not exist"},
        status=404,
    )


def unauthorized(message: str) -> HttpResponse:
    return json_response(
        {"error": "Unauthorized", "code": ErrorCode.AUTHENTICATION_ERROR.value, "message": message},
        status=401,
    )


def database_unavailable(failure: BaseException | None = None) -> HttpResponse:
    return json_response(
        {
            "error": "Service unavailable",
            "code": ErrorCode.NETWORK_ERROR.value,
            "message": UNAVAILABLE_MESSAGE
            if failure is None
            else database_trouble_message(failure),
        },
        status=503,
    )


# Refusals before a run starts, by code: (HTTP status, short error).
_REFUSALS: dict[ErrorCode, tuple[int, str]] = {
    ErrorCode.AGENT_NOT_FOUND: (404, "Agent not found"),
    ErrorCode.THREAD_BUSY: (409, "Thread busy"),
    ErrorCode.BAD_REQUEST: (400, "Invalid request"),
    ErrorCode.CONFIGURATION_ERROR: (400, "Agent not runnable"),
    ErrorCode.AUTHENTICATION_ERROR: (401, "Unauthorized"),
    ErrorCode.NETWORK_ERROR: (503, "Service unavailable"),
}


def refused(error: CopilotKitError) -> HttpResponse:
    """A ``CopilotKitError`` raised before the stream started, as a JSON error."""
    status, short = _REFUSALS.get(error.code, (500, "internal_error"))
    payload: dict[str, Any] = {"error": short, "code": error.code.value, "message": error.message}
    return json_response(payload, status=status)


def sse_response(body: AsyncIterator[bytes]) -> ByteStreamResponse:
    return ByteStreamResponse(body, content_type=SSE_CONTENT_TYPE)
