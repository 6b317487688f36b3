"""generateCopilotResponse through the general executor: the 2022 incremental format.

A stand-in generate resolver builds the response from channels the test feeds one event at a
time, so each step produces exactly one payload and the whole sequence can be asserted.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from copilot_runtime.errors import AgentNotFoundError
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.error_format import UNEXPECTED_ERROR_MESSAGE
from copilot_runtime.graphql.types.enums import MessageRole, MetaEventName
from copilot_runtime.graphql.types.messages import (
    ActionExecutionMessageOutput,
    AgentStateMessageOutput,
    ResultMessageOutput,
    TextMessageOutput,
)
from copilot_runtime.graphql.types.meta_events import (
    CopilotKitLangGraphInterruptEvent,
    CopilotKitLangGraphInterruptEventData,
    LangGraphInterruptEvent,
)
from copilot_runtime.graphql.types.responses import (
    CopilotResponse,
    ExtensionsResponse,
    OpenAIApiAssistantAPIResponse,
)
from copilot_runtime.graphql.types.statuses import (
    FailedMessageStatus,
    FailedResponseStatus,
    FailedResponseStatusReason,
    SuccessMessageStatus,
    SuccessResponseStatus,
)
from tests.copilot_runtime.graphql.helpers import (
    collect,
    document,
    execute_single,
    execute_stream,
    next_payload,
    urql_merge,
)

CREATED_AT = datetime(2026, 11, 21, 21, 38, 11, 344000, tzinfo=UTC)
CREATED_AT_WIRE = "2026-11-21T21:38:11.344Z"
VARIABLES = {
    "data": {
        "frontend": {"actions": []},
        "messages": [
            {
                "createdAt": "2025-01-01T00:00:00.000Z",
                "id": "u1",
                "textMessage": {"content": "Hi", "role": "user"},
            }
        ],
        "metadata": {"requestType": "Chat"},
        "threadId": "thread-abc",
    }
}
RESPONSE = "generateCopilotResponse"

_END = object()


class Channel:
    """An async iterable the test feeds item by item (the engine's side of a stream)."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self.read_by_reader = False
        self.closed_by_reader = False

    def push(self, item: Any) -> None:
        self._queue.put_nowait(item)

    def close(self) -> None:
        self._queue.put_nowait(_END)

    def fail(self, error: BaseException) -> None:
        self._queue.put_nowait(error)

    async def __aiter__(self) -> AsyncIterator[Any]:
        self.read_by_reader = True
        try:
            while True:
                item = await self._queue.get()
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        except (GeneratorExit, asyncio.CancelledError):
            self.closed_by_reader = True
            raise


def response(**overrides: Any) -> CopilotResponse:
    fields: dict[str, Any] = {
        "thread_id": "thread-abc",
        "run_id": "run-1",
        "extensions": None,
        "status_source": SuccessResponseStatus(),
        "messages_source": [],
        "meta_events_source": [],
    }
    fields.update(overrides)
    return CopilotResponse(**fields)


@pytest.fixture
def serve(install_generate: Callable[..., None]) -> Callable[[CopilotResponse], list[Any]]:
    """Make the mutation return ``copilot_response``; returns the list of received calls."""

    def serve_response(copilot_response: CopilotResponse) -> list[Any]:
        calls: list[Any] = []

        async def resolver(*, context: RuntimeContext, data: Any, properties: Any) -> Any:
            calls.append({"context": context, "data": data, "properties": properties})
            return copilot_response

        install_generate(resolver)
        return calls

    return serve_response


async def test_payload_sequence_matches_yoga(
    context: RuntimeContext, serve: Callable[[CopilotResponse], list[Any]]
) -> None:
    loop = asyncio.get_running_loop()
    messages, response_status = Channel(), loop.create_future()
    serve(response(status_source=response_status, messages_source=messages))
    stream = await execute_stream(context, document("generate_copilot_response"), VARIABLES)
    payloads = [await next_payload(stream)]

    text_content, text_status = Channel(), loop.create_future()
    args, args_status = Channel(), loop.create_future()
    steps: list[Callable[[], None]] = [
        lambda: messages.push(
            TextMessageOutput(
                id="msg-1",
                created_at=CREATED_AT,
                role=MessageRole.assistant,
                content_source=text_content,
                status_source=text_status,
            )
        ),
        lambda: text_content.push("Hello"),
        lambda: text_content.push(" world"),
        lambda: (text_content.close(), text_status.set_result(SuccessMessageStatus())),
        lambda: messages.push(
            ActionExecutionMessageOutput(
                id="call-1",
                created_at=CREATED_AT,
                name="sayHello",
                parent_message_id="msg-1",
                arguments_source=args,
                status_source=args_status,
            )
        ),
        lambda: args.push('{"name":'),
        lambda: args.push('"Bob"}'),
        lambda: (args.close(), args_status.set_result(SuccessMessageStatus())),
        lambda: response_status.set_result(SuccessResponseStatus()),
        messages.close,
    ]
    for step in steps:
        step()
        payloads.append(await next_payload(stream))
    with pytest.raises(StopAsyncIteration):
        await next_payload(stream)

    success = {"status": {"code": "Success"}}
    assert payloads == [
        {
            "data": {
                RESPONSE: {
                    "threadId": "thread-abc",
                    "runId": "run-1",
                    "extensions": None,
                    "messages": [],
                    "metaEvents": [],
                }
            },
            "hasNext": True,
        },
        {
            "incremental": [
                {
                    "items": [
                        {
                            "__typename": "TextMessageOutput",
                            "id": "msg-1",
                            "createdAt": CREATED_AT_WIRE,
                            "content": [],
                            "role": "assistant",
                            "parentMessageId": None,
                        }
                    ],
                    "path": [RESPONSE, "messages", 0],
                }
            ],
            "hasNext": True,
        },
        {
            "incremental": [{"items": ["Hello"], "path": [RESPONSE, "messages", 0, "content", 0]}],
            "hasNext": True,
        },
        {
            "incremental": [{"items": [" world"], "path": [RESPONSE, "messages", 0, "content", 1]}],
            "hasNext": True,
        },
        {"incremental": [{"data": success, "path": [RESPONSE, "messages", 0]}], "hasNext": True},
        {
            "incremental": [
                {
                    "items": [
                        {
                            "__typename": "ActionExecutionMessageOutput",
                            "id": "call-1",
                            "createdAt": CREATED_AT_WIRE,
                            "name": "sayHello",
                            "arguments": [],
                            "parentMessageId": "msg-1",
                        }
                    ],
                    "path": [RESPONSE, "messages", 1],
                }
            ],
            "hasNext": True,
        },
        {
            "incremental": [
                {"items": ['{"name":'], "path": [RESPONSE, "messages", 1, "arguments", 0]}
            ],
            "hasNext": True,
        },
        {
            "incremental": [
                {"items": ['"Bob"}'], "path": [RESPONSE, "messages", 1, "arguments", 1]}
            ],
            "hasNext": True,
        },
        {"incremental": [{"data": success, "path": [RESPONSE, "messages", 1]}], "hasNext": True},
        {"incremental": [{"data": success, "path": [RESPONSE]}], "hasNext": True},
        {"hasNext": False},
    ]

    assert urql_merge(payloads) == {
        "data": {
            RESPONSE: {
                "threadId": "thread-abc",
                "runId": "run-1",
                "extensions": None,
                "messages": [
                    {
                        "__typename": "TextMessageOutput",
                        "id": "msg-1",
                        "createdAt": CREATED_AT_WIRE,
                        "content": ["Hello", " world"],
                        "role": "assistant",
                        "parentMessageId": None,
                        "status": {"code": "Success"},
                    },
                    {
                        "__typename": "ActionExecutionMessageOutput",
                        "id": "call-1",
                        "createdAt": CREATED_AT_WIRE,
                        "name": "sayHello",
                        "arguments": ['{"name":', '"Bob"}'],
                        "parentMessageId": "msg-1",
                        "status": {"code": "Success"},
                    },
                ],
                "metaEvents": [],
                "status": {"code": "Success"},
            }
        },
        "errors": [],
        "hasNext": False,
    }


def _every_object_has_typename(value: Any) -> bool:
    if isinstance(value, dict):
        # `details` is a JSON scalar: a plain value, not a GraphQL object.
        return "__typename" in value and all(
            _every_object_has_typename(v) for k, v in value.items() if k != "details"
        )
    if isinstance(value, list):
        return all(_every_object_has_typename(v) for v in value)
    return True


async def test_urql_document_merges_to_the_full_response(
    context: RuntimeContext, serve: Callable[[CopilotResponse], list[Any]]
) -> None:
    """Every message kind and both meta events, as the real client's document asks for them."""
    interrupt_message = TextMessageOutput(
        id="int-1",
        created_at=CREATED_AT,
        role=MessageRole.assistant,
        content_source=["Approve?"],
        status_source=SuccessMessageStatus(),
    )
    serve(
        response(
            run_id=None,
            extensions=ExtensionsResponse(
                openai_assistant_api=OpenAIApiAssistantAPIResponse(run_id="r", thread_id="t")
            ),
            status_source=FailedResponseStatus(
                reason=FailedResponseStatusReason.UNKNOWN_ERROR, details={"description": "x"}
            ),
            messages_source=[
                TextMessageOutput(
                    id="m1",
                    created_at=CREATED_AT,
                    role=MessageRole.assistant,
                    content_source=["Hel", "lo"],
                    status_source=FailedMessageStatus(reason="Error streaming message content"),
                ),
                ResultMessageOutput(
                    id="result-c1",
                    created_at=CREATED_AT,
                    action_execution_id="c1",
                    action_name="serverAdd",
                    result='{"sum":3}',
                    status_source=SuccessMessageStatus(),
                ),
                AgentStateMessageOutput(
                    id="ck-1",
                    created_at=CREATED_AT,
                    thread_id="thread-agent",
                    agent_name="lg_agent",
                    node_name="chat",
                    run_id="lg-run-1",
                    active=True,
                    role=MessageRole.assistant,
                    state='{"counter":1}',
                    running=True,
                    status_source=SuccessMessageStatus(),
                ),
            ],
            meta_events_source=[
                LangGraphInterruptEvent(value='{"question":"Approve?"}'),
                CopilotKitLangGraphInterruptEvent(
                    data=CopilotKitLangGraphInterruptEventData(
                        value="v", messages=[interrupt_message]
                    )
                ),
            ],
        )
    )
    stream = await execute_stream(context, document("generate_copilot_response.urql"), VARIABLES)
    payloads = await collect(stream)

    for payload in payloads[1:]:
        for entry in payload.get("incremental", []):
            assert set(entry) <= {"items", "data", "path", "errors"}, entry
            if "items" in entry:
                assert isinstance(entry["path"][-1], int), entry
    assert all(set(p) <= {"data", "errors", "incremental", "hasNext"} for p in payloads)
    assert payloads[-1]["hasNext"] is False
    assert all(p["hasNext"] is True for p in payloads[:-1])

    merged = urql_merge(payloads)
    assert merged["errors"] == []
    assert _every_object_has_typename(merged["data"][RESPONSE])
    result = merged["data"][RESPONSE]
    assert result["extensions"] == {
        "openaiAssistantAPI": {
            "runId": "r",
            "threadId": "t",
            "__typename": "OpenAIApiAssistantAPIResponse",
        },
        "__typename": "ExtensionsResponse",
    }
    assert result["status"] == {
        "code": "Failed",
        "reason": "UNKNOWN_ERROR",
        "details": {"description": "x"},
        "__typename": "FailedResponseStatus",
    }
    text, result_message, agent_state = result["messages"]
    assert text["content"] == ["Hel", "lo"]
    assert text["status"] == {
        "code": "Failed",
        "reason": "Error streaming message content",
        "__typename": "FailedMessageStatus",
    }
    assert result_message == {
        "__typename": "ResultMessageOutput",
        "id": "result-c1",
        "createdAt": CREATED_AT_WIRE,
        "result": '{"sum":3}',
        "actionExecutionId": "c1",
        "actionName": "serverAdd",
        "status": {"code": "Success", "__typename": "SuccessMessageStatus"},
    }
    assert agent_state["state"] == '{"counter":1}'
    assert (agent_state["threadId"], agent_state["running"], agent_state["active"]) == (
        "thread-agent",
        True,
        True,
    )
    langgraph, copilotkit = result["metaEvents"]
    assert langgraph == {
        "type": "MetaEvent",
        "name": "LangGraphInterruptEvent",
        "value": '{"question":"Approve?"}',
        "__typename": "LangGraphInterruptEvent",
    }
    assert copilotkit["type"] == "MetaEvent"
    assert copilotkit["name"] == MetaEventName.CopilotKitLangGraphInterruptEvent.value
    assert copilotkit["data"]["value"] == "v"
    [nested] = copilotkit["data"]["messages"]
    assert nested["content"] == ["Approve?"]
    assert nested["status"] == {"code": "Success", "__typename": "SuccessMessageStatus"}


async def test_initial_count_offsets_stream_indexes(
    context: RuntimeContext, serve: Callable[[CopilotResponse], list[Any]]
) -> None:
    def text(message_id: str, chunks: list[str]) -> TextMessageOutput:
        return TextMessageOutput(
            id=message_id,
            created_at=CREATED_AT,
            role=MessageRole.assistant,
            content_source=chunks,
            status_source=SuccessMessageStatus(),
        )

    serve(response(messages_source=[text("m1", ["a", "b", "c"]), text("m2", ["x", "y"])]))
    query = """
        mutation Generate($data: GenerateCopilotResponseInput!) {
          generateCopilotResponse(data: $data) {
            messages @stream(initialCount: 1) {
              id
              ... on TextMessageOutput { content @stream(initialCount: 1) }
            }
          }
        }
    """
    payloads = await collect(await execute_stream(context, query, VARIABLES))

    # Each stream continues from its initial count; an item streamed with its own list
    # (m2) gets that list's indexes from the item it arrived in.
    assert payloads == [
        {"data": {RESPONSE: {"messages": [{"id": "m1", "content": ["a"]}]}}, "hasNext": True},
        {
            "incremental": [
                {"items": [{"id": "m2", "content": ["x"]}], "path": [RESPONSE, "messages", 1]},
                {"items": ["b", "c"], "path": [RESPONSE, "messages", 0, "content", 1]},
            ],
            "hasNext": True,
        },
        {
            "incremental": [{"items": ["y"], "path": [RESPONSE, "messages", 1, "content", 1]}],
            "hasNext": False,
        },
    ]
    assert urql_merge(payloads)["data"] == {
        RESPONSE: {
            "messages": [
                {"id": "m1", "content": ["a", "b", "c"]},
                {"id": "m2", "content": ["x", "y"]},
            ]
        }
    }


async def test_failing_stream_sends_a_masked_error_entry(
    context: RuntimeContext,
    serve: Callable[[CopilotResponse], list[Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages = Channel()
    serve(response(messages_source=messages))
    stream = await execute_stream(context, document("generate_copilot_response.urql"), VARIABLES)
    payloads = [await next_payload(stream)]
    messages.push(
        TextMessageOutput(
            id="m1",
            created_at=CREATED_AT,
            role=MessageRole.assistant,
            content_source=["ok"],
            status_source=SuccessMessageStatus(),
        )
    )
    with caplog.at_level(logging.ERROR, logger="copilot_runtime.graphql"):
        messages.fail(RuntimeError("secret boom in /srv/app.py"))
        payloads += await collect(stream)

    wire = json.dumps(payloads)
    assert "secret boom" not in wire and "Traceback" not in wire
    error_entries = [
        entry for p in payloads for entry in p.get("incremental", []) if "errors" in entry
    ]
    assert len(error_entries) == 1
    [entry] = error_entries
    # Points at the item that would have come next; no `data`/`items` that would wipe state.
    assert entry["path"] == [RESPONSE, "messages", 1]
    assert set(entry) == {"errors", "path"}
    [error] = entry["errors"]
    assert error["message"] == UNEXPECTED_ERROR_MESSAGE
    assert error["extensions"]["code"] == "UNKNOWN"
    assert payloads[-1]["hasNext"] is False

    merged = urql_merge(payloads)
    assert merged["data"][RESPONSE]["messages"][0]["content"] == ["ok"]
    assert [e["message"] for e in merged["errors"]] == [UNEXPECTED_ERROR_MESSAGE]
    assert any("secret boom" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


async def test_failing_deferred_status_keeps_the_message(
    context: RuntimeContext, serve: Callable[[CopilotResponse], list[Any]]
) -> None:
    status = asyncio.get_running_loop().create_future()
    status.set_exception(RuntimeError("status secret"))
    serve(
        response(
            messages_source=[
                TextMessageOutput(
                    id="m1",
                    created_at=CREATED_AT,
                    role=MessageRole.assistant,
                    content_source=["ok"],
                    status_source=status,
                )
            ]
        )
    )
    payloads = await collect(
        await execute_stream(context, document("generate_copilot_response"), VARIABLES)
    )
    assert "status secret" not in json.dumps(payloads)
    [entry] = [e for p in payloads for e in p.get("incremental", []) if "errors" in e]
    assert entry["path"] == [RESPONSE, "messages", 0]
    assert entry["errors"][0]["path"] == [RESPONSE, "messages", 0, "status"]
    merged = urql_merge(payloads)
    assert merged["data"][RESPONSE]["messages"][0]["id"] == "m1"
    assert merged["data"][RESPONSE]["messages"][0]["content"] == ["ok"]


async def test_copilotkit_error_before_streaming_is_a_single_result(
    context: RuntimeContext, install_generate: Callable[..., None]
) -> None:
    async def resolver(**_: Any) -> Any:
        raise AgentNotFoundError("ghost")

    install_generate(resolver)
    result = await execute_single(context, document("generate_copilot_response.urql"), VARIABLES)
    assert result["data"] is None
    [error] = result["errors"]
    assert error["path"] == [RESPONSE]
    assert error["locations"] == [{"line": 2, "column": 3}]
    assert error["extensions"]["code"] == "AGENT_NOT_FOUND"
    assert list(result) == ["errors", "data"]


async def test_unexpected_error_before_streaming_is_masked(
    context: RuntimeContext, install_generate: Callable[..., None]
) -> None:
    async def resolver(**_: Any) -> Any:
        raise ValueError("internal detail")

    install_generate(resolver)
    result = await execute_single(context, document("generate_copilot_response"), VARIABLES)
    assert result["errors"][0]["message"] == UNEXPECTED_ERROR_MESSAGE
    assert "internal detail" not in json.dumps(result)


async def _closed_by_reader(*channels: Channel) -> None:
    for _ in range(50):
        if all(channel.closed_by_reader for channel in channels):
            return
        await asyncio.sleep(0.01)


async def test_closing_the_stream_stops_the_producer(
    context: RuntimeContext, serve: Callable[[CopilotResponse], list[Any]]
) -> None:
    """A client that goes away mid-message: closing the payload iterator cancels the engine's
    streams, the message list and the content being read."""
    loop = asyncio.get_running_loop()
    messages, content = Channel(), Channel()
    # A run in progress: neither the response nor the message has its status yet, so the
    # payloads are the message, then its first chunk (a settled status would be one more).
    serve(response(status_source=loop.create_future(), messages_source=messages))
    stream = await execute_stream(context, document("generate_copilot_response"), VARIABLES)
    await next_payload(stream)
    messages.push(
        TextMessageOutput(
            id="m1",
            created_at=CREATED_AT,
            role=MessageRole.assistant,
            content_source=content,
            status_source=loop.create_future(),
        )
    )
    [announced] = (await next_payload(stream))["incremental"]
    assert announced["path"] == [RESPONSE, "messages", 0]
    content.push("partial")
    assert await next_payload(stream) == {
        "incremental": [{"items": ["partial"], "path": [RESPONSE, "messages", 0, "content", 0]}],
        "hasNext": True,
    }

    await stream.aclose()  # type: ignore[attr-defined]

    await _closed_by_reader(messages, content)
    assert messages.closed_by_reader
    assert content.closed_by_reader


async def test_closing_before_a_stream_is_read_leaves_no_reader(
    context: RuntimeContext, serve: Callable[[CopilotResponse], list[Any]]
) -> None:
    """A client that goes away as soon as a message is announced. graphql-core starts reading
    a stream only when its work queue first asks for items, so the content may not have been
    read yet: whether it was depends on turns of the event loop (before Python 3.12,
    ``next_payload``'s ``asyncio.wait_for`` ran ``anext`` in a task of its own, one more turn).
    Either way the message list is cancelled and no reader is left waiting on the content."""
    loop = asyncio.get_running_loop()
    messages, content = Channel(), Channel()
    serve(response(status_source=loop.create_future(), messages_source=messages))
    stream = await execute_stream(context, document("generate_copilot_response"), VARIABLES)
    await next_payload(stream)
    messages.push(
        TextMessageOutput(
            id="m1",
            created_at=CREATED_AT,
            role=MessageRole.assistant,
            content_source=content,
            status_source=loop.create_future(),
        )
    )
    await next_payload(stream)

    await stream.aclose()  # type: ignore[attr-defined]

    await _closed_by_reader(messages, content)
    assert messages.closed_by_reader
    assert content.closed_by_reader or not content.read_by_reader
