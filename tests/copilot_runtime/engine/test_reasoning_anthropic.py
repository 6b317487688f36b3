"""Anthropic's extended thinking: the adapter reads thinking blocks (signed, redacted) as
reasoning sealed with what replays it; the engine sends a turn's signed blocks back with its
tool results, and a later turn's from the reasoning messages the client sends back."""

from __future__ import annotations

from typing import Any

import orjson

from benchmarks.fake_upstream.thinking import signature_of
from copilot_runtime.adapters.anthropic_adapter import AnthropicAdapter, messages_request
from copilot_runtime.adapters.base import (
    ModelRequest,
    ReasoningChunk,
    ReasoningSealChunk,
    TextChunk,
)
from copilot_runtime.adapters.openai_adapter import without_thinking
from copilot_runtime.agui.translate import Translator
from copilot_runtime.engine.chat import ChatTurn, chat_turn_events
from copilot_runtime.engine.model_messages import model_messages
from copilot_runtime.events import ActionResult, ReasoningEnd, ReasoningStart, RunFinished
from copilot_runtime.events.reasoning import THINKING_BLOCKS, sealed_value, thinking_block
from copilot_runtime.events.request import InputMessage
from copilot_runtime.graphql.turn_input import parse_generate_input
from tests.support.actions import server_add


def _adapter(fake_upstream: Any, *, thinking_budget: int = 1024) -> AnthropicAdapter:
    return AnthropicAdapter(
        api_key="t",
        base_url=fake_upstream.base_url.removesuffix("/v1"),
        model="claude-test",
        timeout=5,
        max_retries=0,
        max_tokens=2048,
        thinking_budget=thinking_budget,
    )


async def test_the_adapter_reads_signed_and_redacted_thinking_before_the_text(
    fake_upstream: Any,
) -> None:
    fake_upstream.script({"reasoning": "Greet back.", "redacted_thinking": "ENC", "text": "Hi"})
    adapter = _adapter(fake_upstream)
    try:
        chunks = [c async for c in adapter.stream(ModelRequest(messages=[_user("Hello")]))]
    finally:
        await adapter.aclose()

    reasoning = "".join(c.delta for c in chunks if isinstance(c, ReasoningChunk))
    assert reasoning == "Greet back."
    seals = [c for c in chunks if isinstance(c, ReasoningSealChunk)]
    assert seals == [
        ReasoningSealChunk(signature=signature_of("Greet back.")),
        ReasoningSealChunk(redacted="ENC"),
    ]
    kinds = [type(c) for c in chunks if not isinstance(c, ReasoningChunk)]
    assert kinds.index(ReasoningSealChunk) < kinds.index(TextChunk)
    assert fake_upstream.requests()[-1]["thinking"] == {"type": "enabled", "budget_tokens": 1024}


async def test_without_a_budget_thinking_is_not_asked_for(fake_upstream: Any) -> None:
    fake_upstream.script({"reasoning": "Greet back.", "text": "Hi"})
    adapter = _adapter(fake_upstream, thinking_budget=0)
    try:
        chunks = [c async for c in adapter.stream(ModelRequest(messages=[_user("Hello")]))]
    finally:
        await adapter.aclose()
    assert not any(isinstance(c, ReasoningChunk | ReasoningSealChunk) for c in chunks)
    assert "thinking" not in fake_upstream.requests()[-1]


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def test_a_turns_signed_thinking_goes_back_with_its_tool_results(fake_upstream: Any) -> None:
    directive = {
        "steps": [
            {
                "reasoning": "I need the sum.",
                "redacted_thinking": "ENC",
                "tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 2}}],
            },
            {"text": "It is 3."},
        ]
    }
    data = {
        "frontend": {"actions": []},
        "messages": [
            {
                "id": "u1",
                "createdAt": "2025-01-01T00:00:00.000Z",
                "textMessage": {"content": "FAKE: " + orjson.dumps(directive).decode()},
            }
        ],
        "metadata": {"requestType": "Chat"},
    }
    adapter = _adapter(fake_upstream)
    turn = ChatTurn(
        request=parse_generate_input(data, {}),
        adapter=adapter,
        server_actions={server_add.name: server_add},
        max_iterations=3,
    )
    try:
        events = [event async for event in chat_turn_events(turn)]
    finally:
        await adapter.aclose()

    ends = [e for e in events if isinstance(e, ReasoningEnd)]
    assert [e.encrypted_value for e in ends] == [
        sealed_value(signature=signature_of("I need the sum.")),
        sealed_value(redacted="ENC"),
    ]
    assert len([e for e in events if isinstance(e, ReasoningStart)]) == 2
    assert any(isinstance(e, ActionResult) for e in events)
    # The fake refuses a changed block (400): the second call got them back as they came.
    sent = fake_upstream.requests()[-1]["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert assistant["content"][:2] == [
        {
            "type": "thinking",
            "thinking": "I need the sum.",
            "signature": signature_of("I need the sum."),
        },
        {"type": "redacted_thinking", "data": "ENC"},
    ]
    assert assistant["content"][2]["type"] == "tool_use"


def test_reasoning_messages_sent_back_reach_the_next_assistant_message_only_if_signed() -> None:
    sealed = sealed_value(signature="sig-1")
    messages = [
        InputMessage(id="u1", kind="text", role="user", content="Hi"),
        InputMessage(id="r1", kind="reasoning", role="reasoning", content="T", result=sealed),
        InputMessage(id="r2", kind="reasoning", role="reasoning", content="x", result="opaque"),
        InputMessage(id="a1", kind="text", role="assistant", content="Hello"),
        InputMessage(id="u2", kind="text", role="user", content="Again"),
    ]
    converted = model_messages(messages, [])
    assert converted[1] == {
        "role": "assistant",
        "content": "Hello",
        THINKING_BLOCKS: [{"type": "thinking", "thinking": "T", "signature": "sig-1"}],
    }
    _, anthropic_messages = messages_request(ModelRequest(messages=converted))
    assert anthropic_messages[1]["content"] == [
        {"type": "thinking", "thinking": "T", "signature": "sig-1"},
        {"type": "text", "text": "Hello"},
    ]
    # The chat completions API would refuse the field.
    assert without_thinking(converted)[1] == {"role": "assistant", "content": "Hello"}
    assert without_thinking(converted)[0] is converted[0]


def test_only_values_this_runtime_sealed_become_blocks() -> None:
    assert thinking_block(content="T", encrypted_value="rs_abc") is None
    assert thinking_block(content="T", encrypted_value='{"anthropic.x": 1}') is None
    assert thinking_block(content="T", encrypted_value=None) is None
    assert thinking_block(content="", encrypted_value=sealed_value(redacted="D")) == {
        "type": "redacted_thinking",
        "data": "D",
    }


def test_the_seal_reaches_the_client_as_the_reasoning_messages_encrypted_value() -> None:
    translator = Translator(thread_id="t", run_id="r")
    sealed = sealed_value(signature="sig-1")
    out = translator.translate_all(
        [
            ReasoningStart(message_id="rs1"),
            ReasoningEnd(message_id="rs1", encrypted_value=sealed),
            RunFinished(),
        ]
    )
    assert out[2] == {
        "type": "REASONING_ENCRYPTED_VALUE",
        "subtype": "message",
        "entityId": "rs1",
        "encryptedValue": sealed,
    }
    assert [e["type"] for e in out[3:]] == [
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "RUN_FINISHED",
    ]
