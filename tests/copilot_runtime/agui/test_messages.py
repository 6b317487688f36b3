"""Stored rows -> AG-UI messages: tool calls grouped into their assistant message."""

from __future__ import annotations

import datetime as dt

from conversations.models import Message
from copilot_runtime.agui.messages import agui_messages, thread_endpoint_messages

NOW = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def row(message_id: str, kind: str, **fields: object) -> Message:
    return Message(message_id=message_id, kind=kind, position=0, created_at=NOW, **fields)


def test_rows_group_back_into_agui_messages() -> None:
    rows = [
        row("u1", "text", role="user", content="Hi"),
        row("m1", "text", role="assistant", content="Let me greet"),
        row(
            "c1",
            "action_execution",
            role="assistant",
            action_name="sayHello",
            arguments={"name": "Bob"},
            parent_message_id="m1",
        ),
        row("result-c1", "result", role="tool", action_execution_id="c1", result="ok"),
        row("c2", "action_execution", action_name="f", arguments={}, parent_message_id="m2"),
        row("st", "agent_state", role="assistant"),
    ]
    assert agui_messages(rows) == [
        {"id": "u1", "role": "user", "content": "Hi"},
        {
            "id": "m1",
            "role": "assistant",
            "content": "Let me greet",
            "toolCalls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "sayHello", "arguments": '{"name":"Bob"}'},
                }
            ],
        },
        {"id": "result-c1", "role": "tool", "content": "ok", "toolCallId": "c1"},
        {
            "id": "m2",
            "role": "assistant",
            "toolCalls": [
                {"id": "c2", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
    ]


def test_the_thread_endpoint_shape_lists_calls_as_name_and_args() -> None:
    messages = agui_messages(
        [
            row("m1", "text", role="assistant", content="Hello world"),
            row(
                "c1",
                "action_execution",
                action_name="sayHello",
                arguments={"name": "Bob"},
                parent_message_id="m1",
            ),
        ]
    )
    assert thread_endpoint_messages(messages) == [
        {
            "id": "m1",
            "role": "assistant",
            "content": "Hello world",
            "toolCalls": [{"id": "c1", "name": "sayHello", "args": '{"name":"Bob"}'}],
        }
    ]


def test_stored_reasoning_is_listed_for_a_thread_not_in_a_runs_input() -> None:
    sealed = '{"anthropic.signature":"sig"}'
    rows = [
        row("u1", "text", role="user", content="Hi"),
        row("r1", "reasoning", role="reasoning", content="Thinking."),
        row("r2", "reasoning", role="reasoning", content="", arguments={"encryptedValue": sealed}),
        row("a1", "text", role="assistant", content="Hello"),
    ]
    assert [m["role"] for m in agui_messages(rows)] == ["user", "assistant"]
    assert agui_messages(rows, reasoning=True)[1:3] == [
        {"id": "r1", "role": "reasoning", "content": "Thinking."},
        {"id": "r2", "role": "reasoning", "content": "", "encryptedValue": sealed},
    ]
