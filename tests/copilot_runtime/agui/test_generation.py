"""The AG-UI 1.0 generation (copilot_runtime/agui/generation.py): what a client declaring
``protocolVersion`` 1.x receives, each event checked against the 1.0 JSON Schema, and what a
0.0.59 client receives left as it was."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from copilot_runtime.agui.encoder import SseEncoder
from copilot_runtime.agui.generation import input_from_1_0, resume_answer, speaks_1_0
from copilot_runtime.agui.replay import ThreadHistory, replay_stream
from copilot_runtime.agui.translate import run_started
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    GenerationEnd,
    MetaEvent,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunError,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
    result_message_id,
)
from tests.support.agui_schemas import agui10_event_errors, assert_agui10_events

RUN_INPUT: dict[str, Any] = {
    "threadId": "t-1",
    "runId": "r-1",
    "protocolVersion": "1.0",
    "messages": [{"id": "u1", "role": "user", "content": "Hi"}],
}


def _frames(raw: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(part[len(b"data: ") :]) for part in raw[:-2].split(b"\n\n")]


def _run(events: list[Any], *, protocol_1_0: bool = True) -> list[dict[str, Any]]:
    encoder = SseEncoder(thread_id="t-1", run_id="r-1", protocol_1_0=protocol_1_0)
    out = _frames(encoder.start(RUN_INPUT)) + _frames(encoder.encode(events))
    if protocol_1_0:
        assert_agui10_events(out)
    return out


def _text(message_id: str = "m1") -> list[Any]:
    return [
        TextStart(message_id=message_id),
        TextDelta(message_id=message_id, delta="Hello"),
        TextEnd(message_id=message_id),
    ]


def _call(call_id: str, name: str = "confirm") -> list[Any]:
    return [
        ActionStart(action_execution_id=call_id, action_name=name, parent_message_id="m1"),
        ActionArgs(action_execution_id=call_id, delta='{"q": "ok?"}'),
        ActionEnd(action_execution_id=call_id),
    ]


@pytest.mark.parametrize(
    ("version", "speaks"),
    [("1.0", True), ("1.1", True), ("2.0", True), ("0.0.59", False), ("1", False), (None, False)],
)
def test_the_generation_is_the_inputs_declared_version(version: str | None, speaks: bool) -> None:
    body = {"threadId": "t", "runId": "r", "messages": [], "protocolVersion": version}
    assert speaks_1_0(body) is speaks
    assert speaks_1_0({"threadId": "t", "runId": "r", "protocolVersion": 1.0}) is False


def test_a_text_run_declares_1_0_and_finishes_with_an_outcome() -> None:
    usage = GenerationEnd(
        model="gpt",
        finish_reason="stop",
        input_tokens=9,
        output_tokens=2,
        cached_input_tokens=4,
        cache_write_input_tokens=3,
    )
    started, *_, finished = _run([*_text(), usage, RunFinished()])

    assert started["protocolVersion"] == "1.0"
    assert finished == {
        "type": "RUN_FINISHED",
        "threadId": "t-1",
        "runId": "r-1",
        "outcome": {"type": "success"},
        "usage": [
            {
                "model": "gpt",
                "inputTokens": 9,
                "outputTokens": 2,
                "totalTokens": 11,
                "reasoningTokens": 0,
                "cachedInputTokens": 4,
                # Written to the prompt cache: 1.0 counts it, 0.0.59 has no such field.
                "cacheWriteInputTokens": 3,
            }
        ],
        # 1.0 closes RUN_FINISHED: the finish reason travels in its metadata.
        "metadata": {"finishReason": "stop"},
    }


def test_the_0_0_59_generation_is_unchanged() -> None:
    usage = GenerationEnd(
        model="gpt",
        finish_reason="stop",
        input_tokens=1,
        output_tokens=1,
        cache_write_input_tokens=1,
    )
    started, *_, finished = _run([*_text(), usage, RunFinished()], protocol_1_0=False)

    assert started == run_started(thread_id="t-1", run_id="r-1", run_input=RUN_INPUT)
    assert finished == {
        "type": "RUN_FINISHED",
        "threadId": "t-1",
        "runId": "r-1",
        "finishReason": "stop",
        "usage": [
            {
                "model": "gpt",
                "inputTokens": 1,
                "outputTokens": 1,
                "totalTokens": 2,
                "reasoningTokens": 0,
                "cachedInputTokens": 0,
            }
        ],
    }


def test_frontend_tool_calls_left_unanswered_are_pending() -> None:
    answered = ActionResult(action_execution_id="c1", action_name="serverAdd", result="5")
    *_, finished = _run([*_call("c1", "serverAdd"), answered, *_call("c2"), RunFinished()])

    assert finished["outcome"] == {"type": "success", "pendingToolCallIds": ["c2"]}


def test_an_interrupt_ends_the_run_with_an_interrupt_outcome() -> None:
    interrupts = [
        MetaEvent(name="LangGraphInterruptEvent", value="Approve the transfer?"),
        MetaEvent(
            name="LangGraphInterruptEvent",
            value='{"ask": "amount"}',
            data={"interruptIds": ["lg-7"]},
        ),
    ]
    out = _run([*interrupts, RunFinished(status="interrupted")])

    assert [e["type"] for e in out] == ["RUN_STARTED", "CUSTOM", "CUSTOM", "RUN_FINISHED"]
    assert out[-1]["outcome"] == {
        "type": "interrupt",
        "interrupts": [
            {
                "id": "r-1:interrupt:0",
                "reason": "input_required",
                "message": "Approve the transfer?",
            },
            {"id": "lg-7", "reason": "input_required", "message": '{"ask": "amount"}'},
        ],
    }


def test_a_custom_event_without_a_value_sends_an_empty_one() -> None:
    out = _run([MetaEvent(name="progress"), RunFinished()])
    assert out[1] == {"type": "CUSTOM", "name": "progress", "value": ""}


def test_a_stopped_run_closes_what_is_open_and_finishes_cancelled() -> None:
    events = [TextStart(message_id="m1"), TextDelta(message_id="m1", delta="Hel")]
    out = _run([*events, RunFinished(status="cancelled")])

    assert [e["type"] for e in out][-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert out[-1]["outcome"] == {"type": "cancelled"}


def test_a_run_error_names_no_thread_or_run_and_carries_the_usage() -> None:
    usage = GenerationEnd(model="gpt", input_tokens=4, output_tokens=1)
    *_, error = _run([usage, RunError(message="upstream failed", code="NETWORK_ERROR")])

    assert error == {
        "type": "RUN_ERROR",
        "message": "upstream failed",
        "code": "NETWORK_ERROR",
        "usage": [
            {
                "model": "gpt",
                "inputTokens": 4,
                "outputTokens": 1,
                "totalTokens": 5,
                "reasoningTokens": 0,
                "cachedInputTokens": 0,
                "cacheWriteInputTokens": 0,
            }
        ],
    }
    [lost] = _run([None])[1:]
    assert lost == {
        "type": "RUN_ERROR",
        "message": "Run ended without emitting a terminal event",
        "code": "INCOMPLETE_STREAM",
    }


def test_the_schema_refuses_what_1_0_does_not_define() -> None:
    finished = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
    assert agui10_event_errors(finished) == []
    assert agui10_event_errors({**finished, "finishReason": "stop"})
    assert agui10_event_errors({**finished, "outcome": None})
    assert agui10_event_errors({**finished, "outcome": {"type": "interrupt", "interrupts": []}})
    assert agui10_event_errors({"type": "RUN_ERROR", "message": "x", "threadId": "t"})


def test_tool_results_given_as_content_parts_are_read_as_their_text() -> None:
    tool = {
        "id": "r1",
        "role": "tool",
        "toolCallId": "c1",
        "content": [{"type": "text", "text": "ye"}, {"type": "text", "text": "s"}],
    }
    body = {"threadId": "t", "runId": "r", "messages": [{"id": "u1", "role": "user"}, tool]}
    restated = input_from_1_0(body)

    assert restated["messages"][1] == {**tool, "content": "yes"}
    assert restated["messages"][0] is body["messages"][0]
    plain = {"threadId": "t", "runId": "r", "messages": [{**tool, "content": "yes"}]}
    assert input_from_1_0(plain) is plain


def test_resume_entries_answer_with_the_first_resolved_payload() -> None:
    resolved = {"interruptId": "i2", "status": "resolved", "payload": {"ok": True}}
    cancelled = {"interruptId": "i1", "status": "cancelled"}
    assert resume_answer([cancelled, resolved]) == {"ok": True}
    assert resume_answer([cancelled]) is None
    assert resume_answer([{"interruptId": "i1", "payload": "yes"}]) == "yes"  # 0.0.59's shape


async def test_connect_restates_the_finished_runs_as_snapshots() -> None:
    history = ThreadHistory(thread_id="t-1", last_run_id="r-2")
    for run_id, events in (
        ("r-1", [ReasoningStart(message_id="th1"), ReasoningDelta(message_id="th1", delta="hm")]),
        (
            "r-2",
            [
                *_call("c1"),
                ActionResult(action_execution_id="c1", action_name="confirm", result="ok"),
            ],
        ),
    ):
        encoder = SseEncoder(thread_id="t-1", run_id=run_id)
        run_input = {
            **RUN_INPUT,
            "runId": run_id,
            "messages": [{"id": f"u-{run_id}", "role": "user", "content": "Hi"}],
        }
        history.events += _frames(encoder.start(run_input)) + _frames(
            encoder.encode(
                [
                    *events,
                    ReasoningEnd(message_id="th1"),
                    *_text(f"m-{run_id}"),
                    AgentStateSnapshot(thread_id="t-1", agent_name="default", state={"n": run_id}),
                    RunFinished(),
                ]
            )
        )
    out = _frames(b"".join([chunk async for chunk in replay_stream(history, protocol_1_0=True)]))

    assert_agui10_events(out)
    assert [e["type"] for e in out] == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert out[0]["protocolVersion"] == "1.0"
    assert out[0]["runId"] == out[-1]["runId"] == "r-2"
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "confirm", "arguments": '{"q": "ok?"}'},
    }
    assert out[1]["messages"] == [
        {"id": "u-r-1", "role": "user", "content": "Hi"},
        {"id": "th1", "role": "reasoning", "content": "hm"},
        {"id": "m-r-1", "role": "assistant", "content": "Hello"},
        {"id": "u-r-2", "role": "user", "content": "Hi"},
        {"id": "m1", "role": "assistant", "toolCalls": [call]},
        {"id": result_message_id("c1"), "role": "tool", "content": "ok", "toolCallId": "c1"},
        {"id": "m-r-2", "role": "assistant", "content": "Hello"},
    ]
    assert out[2]["snapshot"] == {"n": "r-2"}
    # A 0.0.59 client's replay is each run's events, compacted.
    old = _frames(b"".join([chunk async for chunk in replay_stream(history)]))
    assert [e["type"] for e in old][:3] == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
    ]


async def test_connect_after_an_interrupt_reports_it_pending() -> None:
    history = ThreadHistory(thread_id="t-1", last_run_id="r-1")
    encoder = SseEncoder(thread_id="t-1", run_id="r-1")
    paused = [
        *_call("c1"),
        MetaEvent(name="LangGraphInterruptEvent", value="Approve?"),
        RunFinished(status="interrupted"),
    ]
    history.events = _frames(encoder.start(RUN_INPUT)) + _frames(encoder.encode(paused))
    history.last_run_events = paused
    live = _run(paused)[-1]["outcome"]
    out = _frames(b"".join([chunk async for chunk in replay_stream(history, protocol_1_0=True)]))

    assert_agui10_events(out)
    assert (
        out[-1]["outcome"]
        == live
        == {
            "type": "interrupt",
            "interrupts": [
                {"id": "r-1:interrupt:0", "reason": "input_required", "message": "Approve?"}
            ],
        }
    )


async def test_connect_after_a_frontend_tool_call_reports_it_pending() -> None:
    history = ThreadHistory(thread_id="t-1", last_run_id="r-2")
    for run_id, events in (("r-1", _call("c1")), ("r-2", _call("c2"))):
        encoder = SseEncoder(thread_id="t-1", run_id=run_id)
        run_input = {**RUN_INPUT, "runId": run_id}
        history.events += _frames(encoder.start(run_input)) + _frames(
            encoder.encode([*events, RunFinished()])
        )
        history.last_run_events = [*events, RunFinished()]
    out = _frames(b"".join([chunk async for chunk in replay_stream(history, protocol_1_0=True)]))

    # The last run's call: the earlier run's was the client's to answer then.
    assert out[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c2"]}
