"""Peer events -> canonical events: runtime-event lines, LangGraph lines, AG-UI events, and
the normalising layer every agent stream goes through."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from agents.agui_client.events import AguiEventMapper
from agents.peer_events.copilotkit import runtime_event_line
from agents.peer_events.langgraph import LangGraphEventMapper
from agents.runners.stream import AgentStream, normalized_events
from copilot_runtime.engine.actions import action_from_object, server_action
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    MetaEvent,
    RunError,
    TextDelta,
    TextEnd,
    TextStart,
)
from tests.support.fixture_peer import fixture_lines


def _kinds(events: list[Event]) -> list[str]:
    return [event.type for event in events]


def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in fixture_lines(name) if line.strip()]


# --- runtime-event lines ------------------------------------------------------------------------


def test_runtime_event_lines_map_one_to_one() -> None:
    events = [e for line in _lines("runtime_events.jsonl") for e in runtime_event_line(line)]

    assert _kinds(events) == [
        "agent_state",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "action_start",
        "action_args",
        "action_args",
        "action_end",
        "agent_state",
    ]
    first_state, last_state = events[0], events[-1]
    assert isinstance(first_state, AgentStateSnapshot) and isinstance(
        last_state, AgentStateSnapshot
    )
    # The state travels as a JSON string and arrives as an object.
    assert first_state.state == {"step": 1}
    assert (last_state.state, last_state.running, last_state.node_name) == (
        {"step": 2, "days": 3},
        False,
        "done",
    )
    start = events[5]
    assert isinstance(start, ActionStart)
    assert (start.action_name, start.parent_message_id) == ("showItinerary", "rt-msg-1")


def test_runtime_event_lines_without_a_known_type_give_nothing() -> None:
    assert runtime_event_line({"type": "RunStarted", "state": {}}) == []
    assert runtime_event_line({"type": "NodeFinished"}) == []
    assert runtime_event_line({"hello": "world"}) == []


def test_a_runtime_run_error_line_fails_with_the_agents_message() -> None:
    (error,) = runtime_event_line({"type": "RunError", "error": {"message": "crew broke"}})

    assert isinstance(error, RunError)
    assert error.code == "AGENT_ERROR"
    assert "crew broke" in error.message


# --- LangGraph astream_events lines -------------------------------------------------------------


def test_langgraph_lines_stream_text_tool_calls_state_and_an_interrupt() -> None:
    mapper = LangGraphEventMapper()
    events = [e for line in _lines("langgraph_events.jsonl") for e in mapper.feed(line)]

    texts = [e for e in events if isinstance(e, TextDelta)]
    assert [(t.message_id, t.delta) for t in texts] == [
        ("run-lg-msg-1", "Looking"),
        ("run-lg-msg-1", " it up."),
        ("lg-manual-1", "Found 2 flights."),
    ]
    # "copilotkit:emit-messages": false hides that model call's text.
    assert all("hidden" not in t.delta for t in texts)

    start = next(e for e in events if isinstance(e, ActionStart))
    assert (start.action_execution_id, start.action_name, start.parent_message_id) == (
        "lg-call-1",
        "searchFlights",
        "run-lg-msg-2",
    )
    args = "".join(e.delta for e in events if isinstance(e, ActionArgs))
    assert json.loads(args) == {"to": "Oslo"}
    assert [e.action_execution_id for e in events if isinstance(e, ActionEnd)] == ["lg-call-1"]

    states = [e for e in events if isinstance(e, AgentStateSnapshot)]
    assert [s.state for s in states] == [
        {"destination": "Oslo"},
        {"destination": "Oslo", "flights": 2},
    ]
    assert states[1].node_name == "pick"

    (interrupt,) = [e for e in events if isinstance(e, MetaEvent)]
    assert interrupt.name == "CopilotKitLangGraphInterruptEvent"
    assert json.loads(interrupt.data["value"]) == {"question": "Book the 9am flight?"}
    assert [m["id"] for m in interrupt.data["messages"]] == ["lg-int-msg", "lg-int-call"]

    # Each text message is bracketed exactly once.
    starts = [e.message_id for e in events if isinstance(e, TextStart)]
    ends = [e.message_id for e in events if isinstance(e, TextEnd)]
    assert starts == ends == ["run-lg-msg-1", "lg-manual-1"]


def test_langgraph_on_interrupt_is_a_langgraph_interrupt_event() -> None:
    (event,) = LangGraphEventMapper().feed({"event": "on_interrupt", "value": '{"a": 1}'})

    assert isinstance(event, MetaEvent)
    assert (event.name, event.value) == ("LangGraphInterruptEvent", '{"a": 1}')


def test_langgraph_copilotkit_error_fails_the_run() -> None:
    mapper = LangGraphEventMapper()
    events = [e for line in _lines("langgraph_error.jsonl") for e in mapper.feed(line)]
    error = next(e for e in events if isinstance(e, RunError))

    assert error.code == "AGENT_ERROR"
    assert "ValueError: the graph crashed" in error.message
    assert error.details == {"agentName": "travel", "statusCode": 500}


def test_langgraph_tool_calls_can_be_hidden_by_name() -> None:
    mapper = LangGraphEventMapper()
    line = {
        "event": "on_chat_model_stream",
        "metadata": {"copilotkit:emit-tool-calls": ["shown"]},
        "data": {
            "chunk": {
                "kwargs": {
                    "id": "m",
                    "content": "",
                    "tool_call_chunks": [
                        {"name": "hidden", "id": "c1", "args": "{}", "index": 0},
                        {"name": "shown", "id": "c2", "args": "{}", "index": 1},
                    ],
                }
            }
        },
    }

    events = mapper.feed(line)

    assert [e.action_name for e in events if isinstance(e, ActionStart)] == ["shown"]
    assert {e.action_execution_id for e in events if isinstance(e, ActionArgs)} == {"c2"}


# --- AG-UI events -------------------------------------------------------------------------------


def _agui(events: list[dict[str, Any]], **state: Any) -> tuple[AguiEventMapper, list[Event]]:
    mapper = AguiEventMapper(thread_id="t", agent_name="lg", state=dict(state))
    out = [mapped for event in events for mapped in mapper.feed(event)]
    return mapper, out


def test_agui_text_tool_calls_and_results() -> None:
    _, events = _agui(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r-1"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hi"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "lookup"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q": 1}'},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "c1", "content": "42"},
            {"type": "RAW", "event": {}},
            {"type": "THINKING_START"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r-1"},
        ]
    )

    assert _kinds(events) == [
        "text_start",
        "text_delta",
        "text_end",
        "action_start",
        "action_args",
        "action_end",
        "action_result",
    ]
    result = events[-1]
    assert isinstance(result, ActionResult)
    assert (result.action_name, result.result) == ("lookup", "42")


def test_agui_chunks_open_and_close_messages_and_calls() -> None:
    _, events = _agui(
        [
            {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "delta": "a"},
            {"type": "TEXT_MESSAGE_CHUNK", "delta": "b"},
            {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "delta": "{}"},
            {"type": "STEP_STARTED", "stepName": "x"},
        ]
    )

    assert _kinds(events) == [
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "action_start",
        "action_args",
        "action_end",
    ]


def test_agui_state_snapshots_deltas_and_steps() -> None:
    mapper, events = _agui(
        [
            {"type": "STEP_STARTED", "stepName": "plan"},
            {"type": "STATE_SNAPSHOT", "snapshot": {"count": 1, "messages": [{"id": "x"}]}},
            {"type": "STATE_SNAPSHOT", "snapshot": {"count": 1, "messages": [{"id": "y"}]}},
            {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/tags", "value": ["a"]}]},
            {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/count", "value": 2}]},
            {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "u", "role": "user"}]},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ],
        count=0,
    )

    states = [e for e in events if isinstance(e, AgentStateSnapshot)]
    # The repeated snapshot (only its messages changed) is not repeated; messages are left out.
    assert [s.state for s in states] == [
        {"count": 1},
        {"count": 1, "tags": ["a"]},
        {"count": 2, "tags": ["a"]},
        {"count": 2, "tags": ["a"]},
    ]
    assert [s.running for s in states] == [True, True, True, False]
    assert states[0].node_name == "plan"
    assert mapper.state["messages"] == [{"id": "y"}]


def test_agui_a_delta_that_does_not_apply_fails_the_run() -> None:
    _, events = _agui([{"type": "STATE_DELTA", "delta": [{"op": "remove", "path": "/nope"}]}])

    (error,) = events
    assert isinstance(error, RunError)
    assert error.code == "AGENT_STATE_PATCH_FAILED"


def test_agui_custom_events_and_interrupts() -> None:
    _, events = _agui(
        [
            {"type": "CUSTOM", "name": "PredictState", "value": [{"tool": "x"}]},
            {"type": "CUSTOM", "name": "on_interrupt", "value": '{"question": "ok?"}'},
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "r",
                "outcome": {"type": "interrupt", "interrupts": [{"id": "i-1", "reason": "x"}]},
            },
        ]
    )

    names = [(e.name, e.value) for e in events if isinstance(e, MetaEvent)]
    # The structured outcome repeats the on_interrupt already seen: not doubled.
    assert names == [
        ("PredictState", [{"tool": "x"}]),
        ("LangGraphInterruptEvent", '{"question": "ok?"}'),
    ]


def test_agui_an_interrupt_outcome_alone_carries_its_ids() -> None:
    _, events = _agui(
        [
            {
                "type": "RUN_FINISHED",
                "threadId": "t",
                "runId": "r",
                "outcome": {
                    "type": "interrupt",
                    "interrupts": [
                        {"id": "i-1", "reason": "r", "metadata": {"langgraph": {"raw": {"q": 1}}}}
                    ],
                },
            }
        ]
    )

    (event,) = events
    assert isinstance(event, MetaEvent)
    assert event.name == "LangGraphInterruptEvent"
    assert json.loads(event.value) == {"q": 1}
    assert event.data == {"interruptIds": ["i-1"]}


def test_agui_run_error() -> None:
    _, events = _agui([{"type": "RUN_ERROR", "message": "boom", "code": "E1"}])

    (error,) = events
    assert isinstance(error, RunError)
    assert (error.code, error.details) == ("AGENT_ERROR", {"agentCode": "E1"})
    assert "boom" in error.message


# --- the normalising layer ----------------------------------------------------------------------


async def _normalized(events: list[Event], stream: AgentStream) -> list[Event]:
    async def source() -> AsyncGenerator[Any, None]:
        for event in events:
            yield event

    return [event async for event in normalized_events(source(), stream)]


async def test_the_stream_brackets_texts_and_calls_and_names_states() -> None:
    stream = AgentStream(thread_id="ours", agent_name="local-name")
    out = await _normalized(
        [
            TextDelta(message_id="a", delta="x"),  # never started
            TextStart(message_id="b"),  # a starts "b" while "a" is open
            TextDelta(message_id="b", delta="y"),
            TextStart(message_id="b"),  # duplicate
            ActionArgs(action_execution_id="unknown", delta="{}"),  # never started
            ActionStart(action_execution_id="c", action_name="f"),
            ActionResult(action_execution_id="c", action_name="f", result="r"),  # before end
            AgentStateSnapshot(thread_id="theirs", agent_name="remote-name", state={"k": 1}),
            MetaEvent(name="on_interrupt", value="v"),
        ],
        stream,
    )

    assert [(e.type, getattr(e, "message_id", None)) for e in out if "text" in e.type] == [
        ("text_start", "a"),
        ("text_delta", "a"),
        ("text_end", "a"),
        ("text_start", "b"),
        ("text_delta", "b"),
        ("text_end", "b"),  # closed at the end of the stream
    ]
    assert _kinds([e for e in out if "action" in e.type]) == [
        "action_start",
        "action_end",
        "action_result",
    ]
    state = next(e for e in out if isinstance(e, AgentStateSnapshot))
    assert (state.thread_id, state.agent_name) == ("ours", "local-name")
    meta = next(e for e in out if isinstance(e, MetaEvent))
    assert meta.name == "LangGraphInterruptEvent"


async def test_the_stream_stops_at_a_run_error_and_leaves_messages_open() -> None:
    out = await _normalized(
        [
            TextStart(message_id="a"),
            TextDelta(message_id="a", delta="partial"),
            RunError(message="broken", code="X"),
            TextDelta(message_id="a", delta="never"),
        ],
        AgentStream(thread_id="t", agent_name="n"),
    )

    assert _kinds(out) == ["text_start", "text_delta", "run_error"]


@server_action(name="serverAdd")
def _server_add(a: int, b: int) -> int:
    return a + b


async def test_the_stream_executes_server_actions_the_agent_calls() -> None:
    stream = AgentStream(thread_id="t", agent_name="n", server_actions={"serverAdd": _server_add})
    out = await _normalized(
        [
            ActionStart(action_execution_id="c1", action_name="serverAdd"),
            ActionArgs(action_execution_id="c1", delta='{"a": 2, '),
            ActionArgs(action_execution_id="c1", delta='"b": 3}'),
            ActionEnd(action_execution_id="c1"),
            ActionStart(action_execution_id="c2", action_name="frontendOnly"),
            ActionEnd(action_execution_id="c2"),
        ],
        stream,
    )

    results = [e for e in out if isinstance(e, ActionResult)]
    assert [(r.action_execution_id, r.result, r.is_error) for r in results] == [("c1", "5", False)]


@pytest.mark.parametrize("name", ["LangGraphInterruptEvent", "CopilotKitLangGraphInterruptEvent"])
def test_interrupt_names_agree_with_the_run_status_rule(name: str) -> None:
    from agents.interrupts import INTERRUPT_EVENT_NAMES
    from conversations.services.runs import INTERRUPT_META_EVENT_NAMES

    assert name in INTERRUPT_EVENT_NAMES
    assert INTERRUPT_EVENT_NAMES == INTERRUPT_META_EVENT_NAMES


async def test_an_agents_server_action_waits_for_the_guardrails_verdict() -> None:
    """In parallel guardrail mode a denied message must not run any server action."""
    executed: list[str] = []

    def add(a: int, b: int) -> int:
        executed.append("add")
        return a + b

    class Denied(Exception):
        pass

    async def deny() -> None:
        raise Denied

    stream = AgentStream(
        thread_id="t",
        agent_name="agent",
        server_actions={"add": action_from_object(add)},
        before_server_action=deny,
    )
    events = [
        ActionStart(action_execution_id="c1", action_name="add"),
        ActionArgs(action_execution_id="c1", delta='{"a": 1, "b": 2}'),
        ActionEnd(action_execution_id="c1"),
    ]
    with pytest.raises(Denied):
        await _normalized(events, stream)
    assert executed == []
