"""Canonical events -> AG-UI events, and the TypeScript runtime's compaction."""

from __future__ import annotations

import pytest

from copilot_runtime.agui.translate import Translator, compact_events, run_started
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    GenerationEnd,
    GenerationStart,
    GuardrailDecision,
    LimitTrip,
    MetaEvent,
    RunError,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.events.state_patch import apply_patch
from tests.support.ag_ui_events import assert_ag_ui_events


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
        {
            "type": "RUN_ERROR",
            "message": "Upstream failed",
            "code": "UPSTREAM_ERROR",
            "threadId": "t-1",
            "runId": "r-1",
        },
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


# --- RUN_FINISHED: finish reason and usage, as the TypeScript runtime reports them ----------


def test_run_finished_carries_the_last_finish_reason_and_the_usage_per_model() -> None:
    events = translator().translate_all(
        [
            GenerationStart(model="gpt-4o-mini"),
            GenerationEnd(
                model="gpt-4o-mini",
                provider="openai.chat",
                finish_reason="tool_calls",
                input_tokens=10,
                output_tokens=4,
                cached_input_tokens=2,
            ),
            GenerationStart(model="gpt-4o-mini"),
            GenerationEnd(
                model="gpt-4o-mini",
                provider="openai.chat",
                finish_reason="stop",
                input_tokens=20,
                output_tokens=6,
                reasoning_tokens=1,
            ),
            GuardrailDecision(denied=False, model="tiny-guard", input_tokens=5, output_tokens=1),
            RunFinished(),
        ]
    )
    assert events == [
        {
            "type": "RUN_FINISHED",
            "threadId": "t-1",
            "runId": "r-1",
            "finishReason": "stop",
            "usage": [
                {
                    "provider": "openai.chat",
                    "model": "gpt-4o-mini",
                    "inputTokens": 30,
                    "outputTokens": 10,
                    "totalTokens": 40,
                    "reasoningTokens": 1,
                    "cachedInputTokens": 2,
                },
                {
                    "model": "tiny-guard",
                    "inputTokens": 5,
                    "outputTokens": 1,
                    "totalTokens": 6,
                    "reasoningTokens": 0,
                    "cachedInputTokens": 0,
                },
            ],
        }
    ]
    assert_ag_ui_events(events)


@pytest.mark.parametrize(
    ("provider_reason", "reported"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool-calls"),
        ("function_call", "tool-calls"),
        ("content_filter", "content-filter"),
        ("something_new", "other"),
    ],
)
def test_finish_reasons_are_reported_in_the_ai_sdks_words(
    provider_reason: str, reported: str
) -> None:
    [finished] = translator().translate_all(
        [GenerationEnd(model="m", finish_reason=provider_reason, input_tokens=1), RunFinished()]
    )
    assert finished["finishReason"] == reported


def test_a_run_without_model_calls_finishes_without_usage() -> None:
    [finished] = translator().translate_all([RunFinished()])
    assert finished == {"type": "RUN_FINISHED", "threadId": "t-1", "runId": "r-1"}


# --- STATE_DELTA --------------------------------------------------------------------------------


def state(values: dict) -> AgentStateSnapshot:
    return AgentStateSnapshot(thread_id="t-1", agent_name="a", state=values)


BIG = {"document": "x" * 2000, "items": list(range(50)), "stage": "draft"}


def test_a_client_without_state_gets_a_snapshot_then_deltas() -> None:
    t = Translator(thread_id="t-1", run_id="r-1", state_deltas=True)
    first = t.translate(state(BIG))
    second = t.translate(state({**BIG, "stage": "review"}))
    unchanged = t.translate(state({**BIG, "stage": "review"}))

    assert first == [{"type": "STATE_SNAPSHOT", "snapshot": BIG}]
    assert second == [
        {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/stage", "value": "review"}]}
    ]
    assert unchanged == []
    assert_ag_ui_events([*first, *second])


def test_the_first_delta_starts_from_the_state_the_client_sent() -> None:
    t = Translator(thread_id="t-1", run_id="r-1", state_deltas=True, client_state=BIG)
    [delta] = t.translate(state({**BIG, "items": [*BIG["items"], 50]}))

    assert delta == {
        "type": "STATE_DELTA",
        "delta": [{"op": "add", "path": "/items/50", "value": 50}],
    }
    # Applied by the maintained library, the delta rebuilds the agent's state.
    assert apply_patch(BIG, delta["delta"]) == {**BIG, "items": [*BIG["items"], 50]}


def test_a_state_replaced_wholesale_goes_as_a_snapshot() -> None:
    t = Translator(thread_id="t-1", run_id="r-1", state_deltas=True, client_state={"a": 1})
    [event] = t.translate(state({"b": 2}))
    assert event == {"type": "STATE_SNAPSHOT", "snapshot": {"b": 2}}


def test_without_deltas_every_state_is_a_snapshot() -> None:
    t = translator()
    t.translate(state(BIG))
    [event] = t.translate(state({**BIG, "stage": "review"}))
    assert event["type"] == "STATE_SNAPSHOT"


def test_the_runs_first_own_patch_follows_the_state_it_starts_from_as_ts_sends_it() -> None:
    t = Translator(thread_id="t-1", run_id="r-1", state_deltas=True, client_state={"a": 1})
    add_b = [{"op": "add", "path": "/b", "value": 2}]
    add_c = [{"op": "add", "path": "/c", "value": 3}]
    first = t.translate(
        AgentStateSnapshot(thread_id="t-1", agent_name="a", state={"a": 1, "b": 2}, delta=add_b)
    )
    second = t.translate(
        AgentStateSnapshot(
            thread_id="t-1", agent_name="a", state={"a": 1, "b": 2, "c": 3}, delta=add_c
        )
    )

    assert first == [
        {"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}},
        {"type": "STATE_DELTA", "delta": add_b},
    ]
    assert second == [{"type": "STATE_DELTA", "delta": add_c}]
    assert_ag_ui_events([*first, *second])
