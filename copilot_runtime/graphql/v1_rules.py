"""The v1 wire's rules, in one place for every path that writes it (the fast-path encoder, the
``generateCopilotResponse`` resolver and the subscription payloads): response and message
statuses and their failure reasons, the client's error codes, interrupt items, result ids.
Plain data and functions: it imports nothing of the GraphQL schema.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import orjson

from copilot_runtime.errors import ErrorCode
from copilot_runtime.events import RunError
from copilot_runtime.guardrails.errors import denial_reason, interrupted_message_reason, is_denial

ROOT = "generateCopilotResponse"
STREAM_ERROR_REASON = "Error streaming message content"
CANCELLED_REASON = "The run was stopped before this message finished."

SUCCESS_MESSAGE_STATUS = {"code": "Success", "__typename": "SuccessMessageStatus"}
SUCCESS_RESPONSE_STATUS = {"code": "Success", "__typename": "SuccessResponseStatus"}

# What the client should make of a run error (react-core maps originalError.code).
UPSTREAM_PREFIX = "UPSTREAM_"
_CLIENT_CODES = {
    # An agent's remote endpoint or AG-UI server (agents/peer_http.py).
    "AGENT_ENDPOINT_UNREACHABLE": ErrorCode.NETWORK_ERROR,
    "AGENT_ENDPOINT_TIMEOUT": ErrorCode.NETWORK_ERROR,
}


def client_error_code(error: RunError) -> ErrorCode:
    """The ``originalError.code`` the frontend turns into its banner. A model service failure
    is classed by its HTTP status as the TypeScript runtime 1.10.6 classes it
    (``convertServiceAdapterError``): 401 an authentication error, any other 4xx (429
    included) a configuration error, 5xx or no status at all (unreachable, timed out, cut
    off) a network error."""
    if error.code.startswith(UPSTREAM_PREFIX):
        status = error.details.get("statusCode")
        if not isinstance(status, int):
            return ErrorCode.NETWORK_ERROR
        if status == 401:
            return ErrorCode.AUTHENTICATION_ERROR
        if 400 <= status < 500:
            return ErrorCode.CONFIGURATION_ERROR
        return ErrorCode.NETWORK_ERROR
    return _CLIENT_CODES.get(error.code, ErrorCode.UNKNOWN)


def iso_now() -> str:
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


# Run errors meaning the stream itself was cut (its executor died), not the model failing.
_INTERRUPTED_CODES = frozenset({"WORKER_LOST"})


def failed_response_status(error: RunError) -> dict[str, Any]:
    if is_denial(error):
        # As the TypeScript runtime answers a Copilot Cloud guardrails denial.
        return {
            "code": "Failed",
            "__typename": "FailedResponseStatus",
            "reason": "GUARDRAILS_VALIDATION_FAILED",
            "details": {"guardrailsReason": denial_reason(error)},
        }
    if error.code in _INTERRUPTED_CODES:
        return {
            "code": "Failed",
            "__typename": "FailedResponseStatus",
            "reason": "MESSAGE_STREAM_INTERRUPTED",
            "details": {"description": error.message, "code": error.code},
        }
    client_code = client_error_code(error)
    return {
        "code": "Failed",
        "__typename": "FailedResponseStatus",
        "reason": "UNKNOWN_ERROR",
        "details": {
            "description": error.message,
            "code": error.code,
            **error.details,
            "originalError": {
                "code": client_code.value,
                "message": error.message,
                "severity": "critical",
                "visibility": "toast",
            },
        },
    }


CANCELLED_ERROR = RunError(message="The run was stopped.", code="CANCELLED")


def final_response_status(error: RunError | None, *, cancelled: bool) -> dict[str, Any]:
    """The response's status at the end of a run: success unless it failed or was stopped."""
    if error is not None:
        return failed_response_status(error)
    if cancelled:
        return failed_response_status(CANCELLED_ERROR)
    return SUCCESS_RESPONSE_STATUS


def open_message_failure_reason(error: RunError | None, *, cancelled: bool) -> str:
    """The ``FailedMessageStatus`` reason of a message still streaming when the run ended."""
    if error is not None and is_denial(error):
        return interrupted_message_reason(error)
    return CANCELLED_REASON if cancelled else STREAM_ERROR_REASON


LANGGRAPH_INTERRUPT = "LangGraphInterruptEvent"
COPILOTKIT_INTERRUPT = "CopilotKitLangGraphInterruptEvent"
# The raw LangGraph event name the TypeScript runtime also streams as a plain interrupt.
INTERRUPT_ALIASES = {"on_interrupt": LANGGRAPH_INTERRUPT}
# Every meta event name the v1 client is shown (the rest stay in the run's log).
INTERRUPT_NAMES = frozenset({LANGGRAPH_INTERRUPT, COPILOTKIT_INTERRUPT, *INTERRUPT_ALIASES})


def meta_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else _json(value)


def interrupt_message_item(message: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """One message shown with a CopilotKit interrupt: a tool call (it has ``arguments``), a
    tool result (``result``) or a text; whole, since the document does not stream them."""
    base = {"id": str(message.get("id") or f"ck-{uuid.uuid4()}"), "createdAt": iso_now()}
    parent = message.get("parentMessageId")
    if "arguments" in message or ("name" in message and "content" not in message):
        arguments = message.get("arguments")
        typename = "ActionExecutionMessageOutput"
        item = {
            "__typename": typename,
            **base,
            "name": str(message.get("name") or ""),
            "arguments": [arguments if isinstance(arguments, str) else _json(arguments or {})],
            "parentMessageId": parent,
        }
    elif "result" in message:
        typename = "ResultMessageOutput"
        item = {
            "__typename": typename,
            **base,
            "result": meta_text(message.get("result")),
            "actionExecutionId": str(message.get("actionExecutionId") or ""),
            "actionName": str(message.get("actionName") or ""),
        }
    else:
        typename = "TextMessageOutput"
        item = {
            "__typename": typename,
            **base,
            "content": [meta_text(message.get("content"))],
            "role": str(message.get("role") or "assistant"),
            "parentMessageId": parent,
        }
    return item, typename


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()
