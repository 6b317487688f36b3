"""The dedicated encoder answers the client's mutation in the TypeScript runtime's shapes."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import parse, print_ast

from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    RunError,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.graphql.execution import prepare_operation
from copilot_runtime.graphql.fastpath import match_fast_operation
from copilot_runtime.graphql.fastpath.documents import (
    CLIENT_MUTATION,
    client_mutation_printed,
    urql_formatted,
)
from copilot_runtime.graphql.fastpath.encoder import V1Encoder, initial_payload
from copilot_runtime.graphql.v1_rules import failed_response_status

ROOT = "generateCopilotResponse"


def _without_timestamps(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for entry in entries:
        for item in entry.get("items", []):
            if isinstance(item, dict) and "createdAt" in item:
                item["createdAt"] = "<t>"
    return entries


def test_the_first_payload_matches_the_typescript_runtime() -> None:
    assert initial_payload(thread_id="thread-abc", run_id="run-1", extensions=None) == {
        "data": {
            ROOT: {
                "threadId": "thread-abc",
                "runId": "run-1",
                "extensions": None,
                "messages": [],
                "metaEvents": [],
                "__typename": "CopilotResponse",
            }
        },
        "hasNext": True,
    }


def test_extensions_round_trip_with_typenames() -> None:
    payload = initial_payload(
        thread_id="t",
        run_id="r",
        extensions={"openaiAssistantAPI": {"threadId": "a", "runId": "b"}},
    )
    assert payload["data"][ROOT]["extensions"] == {
        "openaiAssistantAPI": {
            "runId": "b",
            "threadId": "a",
            "__typename": "OpenAIApiAssistantAPIResponse",
        },
        "__typename": "ExtensionsResponse",
    }


def test_a_text_reply_streams_items_with_absolute_indexes() -> None:
    encoder = V1Encoder()
    first, done = encoder.encode([TextStart(message_id="msg-1")])
    assert not done
    assert _without_timestamps(first) == [
        {
            "items": [
                {
                    "__typename": "TextMessageOutput",
                    "id": "msg-1",
                    "createdAt": "<t>",
                    "content": [],
                    "role": "assistant",
                    "parentMessageId": None,
                }
            ],
            "path": [ROOT, "messages", 0],
        }
    ]
    hello, _ = encoder.encode([TextDelta(message_id="msg-1", delta="Hello")])
    assert hello == [{"items": ["Hello"], "path": [ROOT, "messages", 0, "content", 0]}]
    # Deltas already waiting are folded into one items entry starting at the next index.
    rest, _ = encoder.encode(
        [TextDelta(message_id="msg-1", delta=" big"), TextDelta(message_id="msg-1", delta=" world")]
    )
    assert rest == [{"items": [" big", " world"], "path": [ROOT, "messages", 0, "content", 1]}]
    end, done = encoder.encode([TextEnd(message_id="msg-1"), RunFinished()])
    assert done
    assert end == [
        {
            "data": {
                "status": {"code": "Success", "__typename": "SuccessMessageStatus"},
                "__typename": "TextMessageOutput",
            },
            "path": [ROOT, "messages", 0],
        },
        {
            "data": {
                "status": {"code": "Success", "__typename": "SuccessResponseStatus"},
                "__typename": "CopilotResponse",
            },
            "path": [ROOT],
        },
    ]


def test_a_server_action_streams_call_arguments_and_result() -> None:
    encoder = V1Encoder()
    entries, _ = encoder.encode(
        [
            ActionStart(
                action_execution_id="call-2", action_name="serverAdd", parent_message_id="msg-3"
            ),
            ActionArgs(action_execution_id="call-2", delta='{"a":1,"b":2}'),
            ActionEnd(action_execution_id="call-2"),
            ActionResult(action_execution_id="call-2", action_name="serverAdd", result='{"sum":3}'),
        ]
    )
    assert _without_timestamps(entries) == [
        {
            "items": [
                {
                    "__typename": "ActionExecutionMessageOutput",
                    "id": "call-2",
                    "createdAt": "<t>",
                    "name": "serverAdd",
                    "arguments": [],
                    "parentMessageId": "msg-3",
                }
            ],
            "path": [ROOT, "messages", 0],
        },
        {"items": ['{"a":1,"b":2}'], "path": [ROOT, "messages", 0, "arguments", 0]},
        {
            "data": {
                "status": {"code": "Success", "__typename": "SuccessMessageStatus"},
                "__typename": "ActionExecutionMessageOutput",
            },
            "path": [ROOT, "messages", 0],
        },
        {
            "items": [
                {
                    "__typename": "ResultMessageOutput",
                    "id": "result-call-2",
                    "createdAt": "<t>",
                    "result": '{"sum":3}',
                    "actionExecutionId": "call-2",
                    "actionName": "serverAdd",
                }
            ],
            "path": [ROOT, "messages", 1],
        },
        {
            "data": {
                "status": {"code": "Success", "__typename": "SuccessMessageStatus"},
                "__typename": "ResultMessageOutput",
            },
            "path": [ROOT, "messages", 1],
        },
    ]


def test_an_error_fails_the_response_and_the_open_message_without_a_stack() -> None:
    encoder = V1Encoder()
    encoder.encode([TextStart(message_id="m"), TextDelta(message_id="m", delta="partial")])
    entries, done = encoder.encode(
        [
            RunError(
                message="The model service answered HTTP 500: boom",
                code="UPSTREAM_SERVER_ERROR",
                details={"statusCode": 500},
            ),
            RunFinished(status="failed"),
        ]
    )
    assert done
    status = entries[0]["data"]["status"]
    assert status["code"] == "Failed"
    assert status["__typename"] == "FailedResponseStatus"
    assert status["reason"] == "UNKNOWN_ERROR"
    assert status["details"]["description"] == "The model service answered HTTP 500: boom"
    assert status["details"]["code"] == "UPSTREAM_SERVER_ERROR"
    assert "stack" not in str(status).lower()
    assert entries[1]["data"]["status"] == {
        "code": "Failed",
        "reason": "Error streaming message content",
        "__typename": "FailedMessageStatus",
    }


def test_the_client_document_is_recognised_and_others_are_not() -> None:
    sent = print_ast(urql_formatted(parse(CLIENT_MUTATION)))
    assert sent == client_mutation_printed()
    prepared = prepare_operation(query=sent, variables={}, operation_name="generateCopilotResponse")
    assert not isinstance(prepared, list)
    assert match_fast_operation(prepared) is not None

    # The bare document (without urql's __typename fields) asks for less: general executor.
    bare = prepare_operation(
        query=CLIENT_MUTATION, variables={}, operation_name="generateCopilotResponse"
    )
    assert not isinstance(bare, list)
    assert match_fast_operation(bare) is None


def test_the_document_printed_by_the_real_urql_client_is_recognised() -> None:
    from pathlib import Path

    sent = (
        Path(__file__).parent / "documents" / "generate_copilot_response.urql.graphql"
    ).read_text()
    assert print_ast(parse(sent)) == client_mutation_printed()


@pytest.mark.parametrize(
    ("code", "status", "client_code"),
    [
        ("UPSTREAM_SERVER_ERROR", 500, "NETWORK_ERROR"),
        ("UPSTREAM_SERVER_ERROR", 503, "NETWORK_ERROR"),
        ("UPSTREAM_RATE_LIMITED", 429, "CONFIGURATION_ERROR"),
        ("UPSTREAM_CLIENT_ERROR", 404, "CONFIGURATION_ERROR"),
        ("UPSTREAM_CLIENT_ERROR", 401, "AUTHENTICATION_ERROR"),
        ("UPSTREAM_UNREACHABLE", None, "NETWORK_ERROR"),
        ("UPSTREAM_STREAM_CUT", None, "NETWORK_ERROR"),
        ("AGENT_ENDPOINT_TIMEOUT", None, "NETWORK_ERROR"),
        ("SOMETHING_ELSE", None, "UNKNOWN"),
    ],
)
def test_the_client_code_classes_upstream_failures_as_typescript_does(
    code: str, status: int | None, client_code: str
) -> None:
    details = {"statusCode": status} if status is not None else {}
    wire = failed_response_status(RunError(message="x", code=code, details=details))
    assert wire["details"]["originalError"]["code"] == client_code
    assert wire["details"]["code"] == code
    if status is not None:
        assert wire["details"]["statusCode"] == status
