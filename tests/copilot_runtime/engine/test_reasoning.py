"""A model's reasoning: parsed from OpenAI-compatible streams, streamed by the chat engine as
reasoning events before the answer, and sent to v2 clients as AG-UI REASONING_* events."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from copilot_runtime.adapters.base import ReasoningChunk, TextChunk, ToolCallChunk, joined
from copilot_runtime.adapters.openai_adapter import OpenAIAdapter, parse_chunk, parse_read
from copilot_runtime.agui.translate import Translator
from copilot_runtime.engine.chat import ChatTurn, chat_turn_events
from copilot_runtime.events import (
    ActionStart,
    Event,
    GenerationEnd,
    GenerationStart,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.graphql.turn_input import parse_generate_input
from tests.copilot_runtime.engine.test_chat_turn import SAY_HELLO
from tests.copilot_runtime.tracing.test_deriver import derive


def _delta(**delta: Any) -> bytes:
    return orjson.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_a_reasoning_delta_is_read_from_either_field(field: str) -> None:
    assert parse_chunk(_delta(**{field: "Let me think"})) == [ReasoningChunk("Let me think")]
    # vLLM sends ``content: null`` next to the reasoning; DeepSeek may send both in one delta.
    both = _delta(**{field: "hm", "content": "Hi"})
    assert parse_chunk(both) == [ReasoningChunk("hm"), TextChunk("Hi")]


def test_a_read_parsed_at_once_keeps_reasoning_apart_from_text() -> None:
    payloads = [
        _delta(role="assistant", content=None, reasoning_content="One"),
        _delta(content=None, reasoning_content=" two"),
        _delta(content="Hel", reasoning_content=None),
        _delta(content="lo"),
    ]
    chunks, failure = parse_read(payloads)
    assert failure is None
    assert chunks == [ReasoningChunk("One two"), TextChunk("Hello")]


def test_a_reasoning_delta_that_is_not_a_string_is_an_upstream_error() -> None:
    with pytest.raises(Exception, match="reasoning delta that is not a string"):
        parse_chunk(_delta(reasoning_content=7))


def test_joined_joins_reasoning_deltas_only_with_their_neighbours() -> None:
    chunks = [ReasoningChunk("a"), ReasoningChunk("b"), TextChunk("c"), ReasoningChunk("d")]
    assert joined(chunks) == [ReasoningChunk("ab"), TextChunk("c"), ReasoningChunk("d")]
    call = ToolCallChunk(index=0, id="c1", name="f", arguments_delta="{}")
    assert joined([ReasoningChunk("x"), call]) == [ReasoningChunk("x"), call]


def _request(text: str, *, actions: list[dict[str, Any]] | None = None):
    data = {
        "frontend": {"actions": actions or []},
        "messages": [
            {
                "id": "u1",
                "createdAt": "2025-01-01T00:00:00.000Z",
                "textMessage": {"content": text, "role": "user"},
            }
        ],
        "metadata": {"requestType": "Chat"},
    }
    return parse_generate_input(data, {})


async def _run(fake_upstream, directive: dict[str, Any], **kwargs: Any) -> list[Event]:
    adapter = OpenAIAdapter(
        api_key="test", base_url=fake_upstream.base_url, model="m", timeout=10, max_retries=0
    )
    turn = ChatTurn(
        request=_request("FAKE: " + orjson.dumps(directive).decode(), **kwargs),
        adapter=adapter,
        server_actions={},
        max_iterations=3,
    )
    try:
        return [event async for event in chat_turn_events(turn)]
    finally:
        await adapter.aclose()


def _collapsed(events: list[Event]) -> list[type[Event]]:
    """The event types, runs of one delta type counted once (reads may split them)."""
    out: list[type[Event]] = []
    for event in events:
        kind = type(event)
        if kind in (TextDelta, ReasoningDelta) and out and out[-1] is kind:
            continue
        out.append(kind)
    return out


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_is_streamed_and_closed_before_the_answer(fake_upstream, field) -> None:
    directive = {"reasoning": "First I add, then check.", "reasoning_field": field, "text": "4"}
    events = await _run(fake_upstream, directive)

    assert _collapsed(events) == [
        GenerationStart,
        ReasoningStart,
        ReasoningDelta,
        ReasoningEnd,
        TextStart,
        TextDelta,
        TextEnd,
        GenerationEnd,
    ]
    start = next(e for e in events if isinstance(e, ReasoningStart))
    deltas = [e for e in events if isinstance(e, ReasoningDelta)]
    assert {e.message_id for e in deltas} == {start.message_id}
    assert "".join(e.delta for e in deltas) == "First I add, then check."
    text = next(e for e in events if isinstance(e, TextStart))
    assert text.message_id != start.message_id


async def test_reasoning_is_closed_before_a_tool_call(fake_upstream) -> None:
    directive = {
        "reasoning": "I should greet.",
        "tool_calls": [{"name": "sayHello", "arguments": {"name": "Bo"}}],
    }
    events = await _run(fake_upstream, directive, actions=[SAY_HELLO])
    kinds = _collapsed(events)
    assert kinds.index(ReasoningEnd) < kinds.index(ActionStart)
    assert TextStart not in kinds


def test_reasoning_events_become_the_ag_ui_reasoning_events_in_order() -> None:
    translator = Translator(thread_id="t", run_id="r")
    events: list[Event] = [
        ReasoningStart(message_id="rs1"),
        ReasoningDelta(message_id="rs1", delta="Think"),
        ReasoningDelta(message_id="rs1", delta=""),
        ReasoningEnd(message_id="rs1"),
        TextStart(message_id="m1"),
        TextDelta(message_id="m1", delta="Hi"),
        TextEnd(message_id="m1"),
        RunFinished(),
    ]
    out = translator.translate_all(events)
    assert out[:4] == [
        {"type": "REASONING_START", "messageId": "rs1"},
        {"type": "REASONING_MESSAGE_START", "messageId": "rs1", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rs1", "delta": "Think"},
        {"type": "REASONING_MESSAGE_END", "messageId": "rs1"},
    ]
    assert out[4] == {"type": "REASONING_END", "messageId": "rs1"}
    assert [e["type"] for e in out[5:]] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]


def test_an_open_reasoning_message_is_closed_before_the_runs_end_and_reopened_on_resume() -> None:
    translator = Translator(thread_id="t", run_id="r")
    translator.translate(ReasoningStart(message_id="rs1"))
    assert [e["type"] for e in translator.reopen()] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
    ]
    out = translator.error(message="boom", code="X")
    assert [e["type"] for e in out] == ["REASONING_MESSAGE_END", "REASONING_END", "RUN_ERROR"]


async def test_a_turns_reasoning_is_a_span_of_its_model_call_with_its_text(fake_upstream) -> None:
    events = await _run(fake_upstream, {"reasoning": "Add them up.", "text": "4"})
    spans = derive([*events, RunFinished()], capture_content=True)

    [key] = [key for key in spans if key.startswith("reasoning:")]
    assert spans[key].parent == "generation:1"
    assert spans[key].output == {"text": "Add them up."}
    assert spans[key].is_complete
