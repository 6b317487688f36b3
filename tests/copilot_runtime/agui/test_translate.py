"""Canonical events -> AG-UI events, and the TypeScript runtime's compaction."""

from __future__ import annotations

from copilot_runtime.agui.translate import Translator, compact_events, run_started
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    GenerationEnd,
    GenerationStart,
    LimitTrip,
    MetaEvent,
    RunError,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
)


def translator() -> Translator:
    return Translator(thread_id="t-1", run_id="r-1")


def test_a_text_reply_maps_one_to_one() -> None:
    events = translator().translate_all(
        [
            GenerationStart(model="m"),
            TextStart(message_id="m1"),
            TextDelta(message_id="m1", delta="Hello"),
            TextDelta(message_id="m1", delta=" world"),
            TextEnd(message_id="m1"),
            GenerationEnd(model="m"),
            RunFinished(),
        ]
    )
    assert events == [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": " world"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "RUN_FINISHED", "threadId": "t-1", "runId": "r-1"},
    ]


def test_tool_calls_results_state_and_meta_events() -> None:
    events = translator().translate_all(
        [
            ActionStart(action_execution_id="c1", action_name="sayHello", parent_message_id="m1"),
            ActionArgs(action_execution_id="c1", delta='{"name":'),
            ActionArgs(action_execution_id="c1", delta='"Bob"}'),
            ActionEnd(action_execution_id="c1"),
            ActionResult(action_execution_id="c1", action_name="sayHello", result="done"),
            AgentStateSnapshot(thread_id="t-1", agent_name="default", state={"counter": 1}),
            MetaEvent(name="on_interrupt", value="Approve?"),
            LimitTrip(kind="max_iterations", message="stop"),
        ]
    )
    assert events == [
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "c1",
            "toolCallName": "sayHello",
            "parentMessageId": "m1",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"name":'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '"Bob"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {
            "type": "TOOL_CALL_RESULT",
            "messageId": "result-c1",
            "toolCallId": "c1",
            "content": "done",
            "role": "tool",
        },
        {"type": "STATE_SNAPSHOT", "snapshot": {"counter": 1}},
        {"type": "CUSTOM", "name": "on_interrupt", "value": "Approve?"},
    ]


def test_a_tool_call_without_parent_omits_the_field() -> None:
    [start] = translator().translate(ActionStart(action_execution_id="c1", action_name="f"))
    assert "parentMessageId" not in start


def test_injected_loop_messages_keep_their_role() -> None:
    [start] = translator().translate(TextStart(message_id="n1", role="developer"))
    assert start == {"type": "TEXT_MESSAGE_START", "messageId": "n1", "role": "developer"}
    [start] = translator().translate(TextStart(message_id="n2", role="tool"))
    assert start["role"] == "assistant"


def test_a_stopped_run_closes_what_is_open_before_run_finished() -> None:
    events = translator().translate_all(
        [
            TextStart(message_id="m1"),
            TextDelta(message_id="m1", delta="Hel"),
            ActionStart(action_execution_id="c1", action_name="f", parent_message_id="m1"),
            RunFinished(status="cancelled"),
        ]
    )
    assert [e["type"] for e in events][-3:] == ["TEXT_MESSAGE_END", "TOOL_CALL_END", "RUN_FINISHED"]


def test_a_run_error_closes_open_messages_and_ends_the_run() -> None:
    t = translator()
    events = t.translate_all(
        [
            TextStart(message_id="m1"),
            TextDelta(message_id="m1", delta="Hel"),
            RunError(message="Upstream failed", code="UPSTREAM_ERROR"),
            GenerationEnd(model="m"),
            RunFinished(status="failed"),
            TextDelta(message_id="m1", delta="lo"),
        ]
    )
    assert events[-2:] == [
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "RUN_ERROR", "message": "Upstream failed", "code": "UPSTREAM_ERROR"},
    ]
    assert t.ended


def test_a_failed_run_without_its_error_still_ends_in_run_error() -> None:
    [error] = translator().translate(RunFinished(status="failed"))
    assert error["type"] == "RUN_ERROR"


def test_deltas_of_unknown_or_closed_messages_and_empty_deltas_are_dropped() -> None:
    t = translator()
    assert t.translate(TextDelta(message_id="nope", delta="x")) == []
    t.translate(TextStart(message_id="m1"))
    assert t.translate(TextDelta(message_id="m1", delta="")) == []
    t.translate(TextEnd(message_id="m1"))
    assert t.translate(TextDelta(message_id="m1", delta="late")) == []
    assert t.translate(TextEnd(message_id="m1")) == []


def test_reopen_restarts_what_is_open_for_a_resumed_stream() -> None:
    t = translator()
    t.translate_all(
        [
            TextStart(message_id="m1"),
            TextEnd(message_id="m1"),
            ActionStart(action_execution_id="c1", action_name="f", parent_message_id="m1"),
        ]
    )
    assert t.reopen() == [
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "c1",
            "toolCallName": "f",
            "parentMessageId": "m1",
        }
    ]


def test_compaction_merges_deltas_per_message_and_keeps_run_boundaries() -> None:
    started = run_started(thread_id="t-1", run_id="r-1", run_input={"messages": []})
    events = [
        started,
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello"},
        {"type": "CUSTOM", "name": "x", "value": 1},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": " world"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"a":'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "1}"},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}},
        {"type": "STATE_SNAPSHOT", "snapshot": {"n": 2}},
        {"type": "RUN_FINISHED", "threadId": "t-1", "runId": "r-1"},
    ]
    assert compact_events(events) == [
        started,
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello world"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "CUSTOM", "name": "x", "value": 1},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "f"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"a":1}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"n": 2}},
        {"type": "RUN_FINISHED", "threadId": "t-1", "runId": "r-1"},
    ]


def test_compaction_flushes_an_unfinished_message_at_the_end() -> None:
    events = [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "a"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "b"},
    ]
    assert compact_events(events) == [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "ab"},
    ]
