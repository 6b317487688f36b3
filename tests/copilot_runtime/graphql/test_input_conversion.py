"""What the generate resolver receives: the request as plain camelCase dicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.input_conversion import input_to_dict
from copilot_runtime.graphql.types.enums import MessageRole
from copilot_runtime.graphql.types.inputs import TextMessageInput
from copilot_runtime.graphql.types.responses import CopilotResponse
from copilot_runtime.graphql.types.statuses import SuccessResponseStatus
from tests.copilot_runtime.graphql.helpers import collect, document, execute_stream

FULL_REQUEST: dict[str, Any] = {
    "threadId": "thread-abc",
    "runId": "run-prev",
    "messages": [
        {
            "id": "u1",
            "createdAt": "2025-01-01T00:00:00Z",
            "textMessage": {"content": "Hi", "role": "user", "parentMessageId": None},
        },
        {
            "id": "call-1",
            "createdAt": "2025-01-01T10:00:00.123456+02:00",
            "actionExecutionMessage": {
                "name": "sayHello",
                "arguments": '{"name":"Bob"}',
                "parentMessageId": "a1",
                "scope": "client",
            },
        },
        {
            "id": "r1",
            "createdAt": "2025-01-01T00:00:01.000Z",
            "resultMessage": {
                "actionExecutionId": "call-1",
                "actionName": "sayHello",
                "result": "ok",
            },
        },
        {
            "id": "img",
            "createdAt": "2025-01-01T00:00:02.000Z",
            "imageMessage": {"format": "png", "bytes": "AAAA", "role": "user"},
        },
        {
            "id": "st",
            "createdAt": "2025-01-01T00:00:03.000Z",
            "agentStateMessage": {
                "threadId": "t",
                "agentName": "a",
                "nodeName": "n",
                "runId": "r",
                "active": True,
                "running": False,
                "role": "assistant",
                "state": "{}",
            },
        },
    ],
    "frontend": {
        "actions": [
            {
                "name": "sayHello",
                "description": "Say hello",
                "jsonSchema": "{}",
                "available": "remote",
            }
        ],
        "url": "http://127.0.0.1/page",
        "toDeprecate_fullContext": "ctx",
    },
    "metadata": {"requestType": "TextareaPopover"},
    "forwardedParameters": {
        "temperature": 0.5,
        "maxTokens": 100,
        "stop": ["\n"],
        "toolChoice": "required",
    },
    "extensions": {"openaiAssistantAPI": {"threadId": "oa-t", "runId": None}},
    "agentSession": {"agentName": "default", "threadId": "thread-abc"},
    "agentStates": [{"agentName": "default", "state": '{"a":1}', "config": '{"c":2}'}],
    "context": [{"description": "user name", "value": "Ada"}],
    "metaEvents": [
        {
            "name": "LangGraphInterruptEvent",
            "value": "v",
            "response": "yes",
            "messages": [
                {
                    "id": "u1",
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "textMessage": {"content": "Hi", "role": "user"},
                }
            ],
        }
    ],
    "cloud": {"guardrails": {"inputValidationRules": {"denyList": ["politics"]}}},
}


@pytest.fixture
def received(install_generate: Callable[..., None]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    async def resolver(*, context: RuntimeContext, data: Any, properties: Any) -> CopilotResponse:
        calls.append({"context": context, "data": data, "properties": properties})
        return CopilotResponse(
            thread_id="t", status_source=SuccessResponseStatus(), messages_source=[]
        )

    install_generate(resolver)
    return calls


async def test_request_arrives_as_plain_camel_case_dict(
    context: RuntimeContext, received: list[dict[str, Any]]
) -> None:
    await collect(
        await execute_stream(
            context,
            document("generate_copilot_response.urql"),
            {"data": FULL_REQUEST, "properties": {"foo": {"bar": [1, None]}}},
        )
    )
    [call] = received
    assert call["context"] is context
    assert call["properties"] == {"foo": {"bar": [1, None]}}
    data = call["data"]

    # Dates normalized to JavaScript's toISOString form (UTC, milliseconds).
    assert [m["createdAt"] for m in data["messages"]] == [
        "2025-01-01T00:00:00.000Z",
        "2025-01-01T08:00:00.123Z",
        "2025-01-01T00:00:01.000Z",
        "2025-01-01T00:00:02.000Z",
        "2025-01-01T00:00:03.000Z",
    ]
    # Explicit nulls are dropped like omitted fields; the SDL default lists appear.
    assert data["messages"][0]["textMessage"] == {"content": "Hi", "role": "user"}
    assert data["extensions"] == {"openaiAssistantAPI": {"threadId": "oa-t"}}
    assert data["cloud"] == {
        "guardrails": {"inputValidationRules": {"allowList": [], "denyList": ["politics"]}}
    }
    expected = {**FULL_REQUEST}
    expected.pop("cloud")
    expected.pop("extensions")
    expected["messages"] = [
        {**message, "createdAt": data["messages"][index]["createdAt"]}
        for index, message in enumerate(FULL_REQUEST["messages"])
    ]
    expected["messages"][0] = {
        **expected["messages"][0],
        "textMessage": {"content": "Hi", "role": "user"},
    }
    actual = {key: value for key, value in data.items() if key not in {"cloud", "extensions"}}
    assert actual == expected
    assert isinstance(data["forwardedParameters"]["maxTokens"], float)


async def test_absent_properties_are_none(
    context: RuntimeContext, received: list[dict[str, Any]]
) -> None:
    minimal = {"frontend": {"actions": []}, "messages": [], "metadata": {}}
    await collect(
        await execute_stream(context, document("generate_copilot_response"), {"data": minimal})
    )
    assert received[0]["properties"] is None
    assert received[0]["data"] == minimal


def test_input_to_dict_uses_wire_names() -> None:
    message = TextMessageInput(content="Hi", role=MessageRole.developer, parent_message_id="p")
    assert input_to_dict(message) == {"content": "Hi", "role": "developer", "parentMessageId": "p"}


def test_input_to_dict_refuses_plain_values() -> None:
    with pytest.raises(TypeError):
        input_to_dict({"content": "Hi"})
