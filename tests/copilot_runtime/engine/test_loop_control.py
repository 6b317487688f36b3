"""Loop control: the iteration cap, should_continue / next_message, todos, approvals and the
circuit breakers, against the fake upstream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from django.test import override_settings

from copilot_runtime.adapters.openai_adapter import OpenAIAdapter
from copilot_runtime.engine.actions import action_from_object
from copilot_runtime.engine.breakers import EMPTY_TOOL_CALLS_CODE, failure_key
from copilot_runtime.engine.chat import MAX_ITERATIONS_CODE, ChatTurn, chat_turn_events
from copilot_runtime.engine.loop_policy import LoopPolicy, LoopTurn, loop_policy_for
from copilot_runtime.events import (
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    GenerationStart,
    LimitTrip,
    RunError,
    TextDelta,
    TextStart,
)
from copilot_runtime.events.request import InputMessage
from copilot_runtime.graphql.turn_input import parse_generate_input
from tests.support import loop_actions
from tests.support.actions import server_add

SOMETIMES = action_from_object(loop_actions.sometimes_fails)


@pytest.fixture(autouse=True)
def _forget_executions() -> Iterator[None]:
    loop_actions.EXECUTIONS.clear()
    yield


def _fake(directive: dict[str, Any]) -> str:
    return "FAKE: " + orjson.dumps(directive).decode()


def _request(text: str, **extra: Any):
    return parse_generate_input(
        {
            "threadId": "loop-thread",
            "frontend": {"actions": []},
            "messages": [
                {
                    "id": "u1",
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "textMessage": {"content": text, "role": "user"},
                }
            ],
            "metadata": {"requestType": "Chat"},
            **extra,
        },
        {},
    )


async def _run(
    fake_upstream,
    request,
    *,
    actions=(),
    policy: LoopPolicy | None = None,
    max_iterations: int = 10,
) -> list[Event]:
    # Instructions keep their own role (as sent to OpenAI's API; OPENAI_SYSTEM_ROLE's auto would
    # send system to the loopback fake).
    adapter = OpenAIAdapter(
        api_key="t",
        base_url=fake_upstream.base_url,
        model="m",
        timeout=10,
        max_retries=0,
        system_role="developer",
    )
    turn = ChatTurn(
        request=request,
        adapter=adapter,
        server_actions={action.name: action for action in actions},
        max_iterations=max_iterations,
        policy=policy,
    )
    return [event async for event in chat_turn_events(turn)]


def _call(fail: bool, tag: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "sometimes_fails", "arguments": {"fail": fail, "tag": tag}}]}


def _results(events: list[Event]) -> list[str]:
    return [e.result for e in events if isinstance(e, ActionResult)]


def _text(events: list[Event]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextDelta))


async def test_a_call_failing_three_times_is_stopped_and_the_model_answers(fake_upstream) -> None:
    steps = [_call(True, "a")] * 4 + [{"text": "I could not do it"}]
    events = await _run(fake_upstream, _request(_fake({"steps": steps})), actions=[SOMETIMES])

    results = _results(events)
    assert len(loop_actions.EXECUTIONS) == 3
    assert all("HANDLER_ERROR" in r for r in results[:3])
    assert results[3].startswith("STOP:")
    assert "'sometimes_fails'" in results[3] and "3 times" in results[3]
    trips = [e for e in events if isinstance(e, LimitTrip)]
    assert [t.kind for t in trips] == ["tool_circuit_breaker"]
    assert _text(events) == "I could not do it"


async def test_alternating_argument_sets_are_counted_apart(fake_upstream) -> None:
    steps = [_call(True, "a"), _call(True, "b")] * 3 + [_call(True, "a"), {"text": "done"}]
    events = await _run(fake_upstream, _request(_fake({"steps": steps})), actions=[SOMETIMES])

    results = _results(events)
    assert len(loop_actions.EXECUTIONS) == 6
    assert not any(r.startswith("STOP:") for r in results[:6])
    assert results[6].startswith("STOP:")


async def test_a_success_clears_the_actions_failure_counters(fake_upstream) -> None:
    steps = [_call(True, "a")] * 2 + [_call(False, "b")] + [_call(True, "a")] * 3
    steps.append({"text": "done"})
    events = await _run(fake_upstream, _request(_fake({"steps": steps})), actions=[SOMETIMES])

    assert not any(r.startswith("STOP:") for r in _results(events))
    assert len(loop_actions.EXECUTIONS) == 6


def test_the_failure_key_ignores_argument_order() -> None:
    assert failure_key("f", '{"a":1,"b":2}') == failure_key("f", '{"b": 2, "a": 1}')
    assert failure_key("f", '{"a":1}') != failure_key("g", '{"a":1}')


async def test_six_turns_of_empty_tool_calls_end_the_run(fake_upstream) -> None:
    directive = {
        "steps": [{"tool_calls": [{"name": "serverAdd", "arguments": ""}]}],
        "repeat_last": True,
    }
    events = await _run(fake_upstream, _request(_fake(directive)), actions=[server_add])

    assert sum(isinstance(e, GenerationStart) for e in events) == 6
    error = events[-1]
    assert isinstance(error, RunError)
    assert error.code == EMPTY_TOOL_CALLS_CODE
    assert "smaller parts" in error.message
    assert any(isinstance(e, LimitTrip) and e.kind == EMPTY_TOOL_CALLS_CODE for e in events)


async def test_a_turn_with_arguments_resets_the_empty_calls_counter(fake_upstream) -> None:
    empty = {"tool_calls": [{"name": "serverAdd", "arguments": ""}]}
    full = {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 1}}]}
    steps = [empty] * 5 + [full] + [empty] * 3 + [{"text": "ok"}]
    events = await _run(
        fake_upstream, _request(_fake({"steps": steps})), actions=[server_add], max_iterations=20
    )
    assert not any(isinstance(e, RunError) for e in events)
    assert _text(events) == "ok"


async def test_the_cap_ends_a_loop_that_never_stops_calling_tools(fake_upstream) -> None:
    directive = {"steps": [_call(False, "x")], "repeat_last": True}
    events = await _run(
        fake_upstream, _request(_fake(directive)), actions=[SOMETIMES], max_iterations=4
    )
    assert sum(isinstance(e, GenerationStart) for e in events) == 4
    assert isinstance(events[-1], RunError) and events[-1].code == MAX_ITERATIONS_CODE
    assert any(isinstance(e, LimitTrip) and e.kind == "max_iterations" for e in events)


async def test_should_continue_keeps_going_and_the_next_message_is_in_the_transcript(
    fake_upstream,
) -> None:
    seen: list[int] = []

    def keep_going(turn: LoopTurn) -> bool:
        seen.append(turn.iteration)
        return turn.iteration < 2

    policy = LoopPolicy(
        max_iterations=10,
        should_continue=keep_going,
        next_message=lambda turn: f"Go on (iteration {turn.iteration})",
        next_message_role="developer",
    )
    steps = [{"text": "first"}, {"text": "second"}]
    events = await _run(fake_upstream, _request(_fake({"steps": steps})), policy=policy)

    assert seen == [1, 2]
    nudges = [e for e in events if isinstance(e, TextStart) and e.role == "developer"]
    assert len(nudges) == 1
    assert "Go on (iteration 1)" in _text(events)
    second = fake_upstream.requests()[1]["messages"]
    assert second[-1] == {"role": "developer", "content": "Go on (iteration 1)"}


async def test_the_cap_is_checked_before_the_predicate(fake_upstream) -> None:
    calls: list[int] = []

    def always(turn: LoopTurn) -> bool:
        calls.append(turn.iteration)
        return True

    policy = LoopPolicy(max_iterations=3, should_continue=always, next_message_role="developer")
    events = await _run(
        fake_upstream, _request(_fake({"text": "again"})), policy=policy, max_iterations=3
    )
    assert calls == [1, 2]  # never called at the third (last) iteration
    assert sum(isinstance(e, GenerationStart) for e in events) == 3
    assert not any(isinstance(e, RunError) for e in events)


@override_settings(
    COPILOT_RUNTIME={"LOOP": {"should_continue": "todos", "next_message_role": "developer"}}
)
async def test_the_todo_policy_continues_while_todos_are_open(fake_upstream) -> None:
    policy = loop_policy_for("default")
    state = {"todos": [{"title": "write the report", "done": False}]}
    steps = [
        {"text": "Working on it"},
        {
            "tool_calls": [
                {
                    "name": "update_todos",
                    "arguments": {"todos": [{"title": "write the report", "done": True}]},
                }
            ]
        },
        {"text": "All done"},
    ]
    request = _request(_fake({"steps": steps}))
    request.state = state
    events = await _run(fake_upstream, request, policy=policy)

    reminder = fake_upstream.requests()[1]["messages"][-1]
    assert reminder["role"] == "developer"
    assert "write the report" in reminder["content"]
    snapshot = next(e for e in events if isinstance(e, AgentStateSnapshot))
    assert snapshot.state["todos"] == [{"title": "write the report", "done": True}]
    assert _text(events).endswith("All done")
    assert len(fake_upstream.requests()) == 3


async def test_an_action_needing_approval_is_returned_to_the_client_not_run(
    fake_upstream,
) -> None:
    guarded = action_from_object(loop_actions.sometimes_fails)
    guarded = type(guarded)(**{**guarded.__dict__, "needs_approval": True})
    directive = _call(False, "approve-me")
    events = await _run(fake_upstream, _request(_fake(directive)), actions=[guarded])

    assert any(isinstance(e, ActionStart) for e in events)
    assert not any(isinstance(e, ActionResult) for e in events)
    assert loop_actions.EXECUTIONS == []
    assert len(fake_upstream.requests()) == 1


@pytest.mark.parametrize(
    ("decision", "runs"),
    [('{"approved": true}', True), ('{"approved": false, "reason": "no"}', False)],
)
async def test_the_clients_decision_resumes_the_loop(
    fake_upstream, decision: str, runs: bool
) -> None:
    guarded = action_from_object(loop_actions.sometimes_fails)
    guarded = type(guarded)(**{**guarded.__dict__, "needs_approval": True})
    request = _request(_fake({"text": "Thanks"}))
    request.messages += [
        InputMessage(
            id="call-9",
            kind="action_execution",
            role="assistant",
            action_name="sometimes_fails",
            arguments={"fail": False, "tag": "z"},
            parent_message_id="a-9",
        ),
        InputMessage(
            id="answer-9",
            kind="result",
            role="tool",
            action_execution_id="call-9",
            action_name="sometimes_fails",
            result=decision,
        ),
    ]
    events = await _run(fake_upstream, request, actions=[guarded])

    result = next(e for e in events if isinstance(e, ActionResult))
    sent = fake_upstream.requests()[0]["messages"][-1]
    if runs:
        assert loop_actions.EXECUTIONS == [("sometimes_fails", {"fail": False, "tag": "z"})]
        assert result.result == "ok (z)"
    else:
        assert loop_actions.EXECUTIONS == []
        assert "rejected" in result.result and "no" in result.result
    assert sent == {"role": "tool", "tool_call_id": "call-9", "content": result.result}
    assert _text(events) == "Thanks"


async def test_failure_counters_never_leak_from_one_run_to_the_next(fake_upstream) -> None:
    steps = [_call(True, "same")] * 2 + [{"text": "gave up"}]
    for _ in range(2):
        events = await _run(fake_upstream, _request(_fake({"steps": steps})), actions=[SOMETIMES])
        assert not any(r.startswith("STOP:") for r in _results(events))
    assert len(loop_actions.EXECUTIONS) == 4


@override_settings(
    COPILOT_RUNTIME={
        "LOOP": {"max_iterations": 7},
        "AGENTS": {"planner": {"kind": "python", "loop": {"max_iterations": 2}}},
    }
)
def test_an_agents_own_loop_settings_override_the_global_ones() -> None:
    assert loop_policy_for("planner").max_iterations == 2
    assert loop_policy_for("default").max_iterations == 7
