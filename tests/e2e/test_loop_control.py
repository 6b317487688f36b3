"""Loop control end to end: the tool-call circuit breakers, the iteration cap, the todo policy
and approvals, driven by the real CopilotKit GraphQL client against the served process.

The fake OpenAI upstream plays a model that misbehaves on purpose (the same failing call again
and again, empty arguments, never answering in text); the test actions in
``tests.support.loop_e2e_actions`` write one line per execution to a file, so a call the loop
held back is visibly one that never ran.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import RunStatus
from copilot_runtime.engine.breakers import EMPTY_TOOL_CALLS_CODE
from copilot_runtime.engine.chat import MAX_ITERATIONS_CODE
from tests.e2e.js_client import run_js
from tests.support.generate_e2e import (
    GRAPHQL_PATH,
    finished_run,
    generate_command,
    generate_data,
    joined_content,
    run_events,
    server_env,
    text_input,
    thread_rows,
)
from tests.support.loop_e2e_actions import EXECUTION_LOG_ENV, read_executions

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = pytest.mark.e2e

OLD_CLIENT = "1.10.6"
NEW_CLIENT = "1.74.0"
ACTIONS_MODULE = "tests.support.loop_e2e_actions"
LOOP_ACTIONS = f"{ACTIONS_MODULE}.flaky_lookup,{ACTIONS_MODULE}.ping"
APPROVAL_ACTIONS = f"{ACTIONS_MODULE}.recorded_add"
TOOL_CIRCUIT_BREAKER = "tool_circuit_breaker"

AE = "ActionExecutionMessageOutput"
RESULT = "ResultMessageOutput"
TEXT = "TextMessageOutput"
AGENT_STATE = "AgentStateMessageOutput"


@pytest.fixture
def execution_log(tmp_path: Path) -> Path:
    return tmp_path / "executions.jsonl"


def start_server(
    live_server_factory: Any,
    fake_upstream: FakeUpstream,
    execution_log: Path,
    *,
    actions: str = LOOP_ACTIONS,
    **extra: str,
) -> ServedProcess:
    env = server_env(
        fake_upstream.base_url,
        COPILOT_RUNTIME_ACTIONS=actions,
        **{EXECUTION_LOG_ENV: str(execution_log)},
        **extra,
    )
    return live_server_factory(env=env)


def lookup(key: str, *, fail: bool = True) -> dict[str, Any]:
    """A model turn calling ``flakyLookup`` (which raises when ``fail`` is true)."""
    return {"tool_calls": [{"name": "flakyLookup", "arguments": {"key": key, "fail": fail}}]}


def fake_line(directive: dict[str, Any]) -> str:
    """An inline script for the fake upstream, read from the last user message."""
    return "FAKE: " + json.dumps(directive)


def typenames(turn: dict[str, Any]) -> list[str]:
    return [message["__typename"] for message in turn["final"]["messages"]]


def of_type(turn: dict[str, Any], typename: str) -> list[dict[str, Any]]:
    return [message for message in turn["final"]["messages"] if message["__typename"] == typename]


def results(turn: dict[str, Any]) -> list[str]:
    return [message["result"] for message in of_type(turn, RESULT)]


def error_code_of(result: str) -> str | None:
    """The code of an action error encoded as the TypeScript runtime does, else None."""
    try:
        decoded = json.loads(result)
    except json.JSONDecodeError:
        return None
    if isinstance(decoded, dict) and isinstance(decoded.get("error"), dict):
        return decoded["error"].get("code")
    return None


def tool_messages(model_request: dict[str, Any]) -> list[dict[str, Any]]:
    return [message for message in model_request["messages"] if message["role"] == "tool"]


def executed_keys(execution_log: Path) -> list[tuple[str, bool]]:
    return [
        (entry["arguments"]["key"], entry["arguments"]["fail"])
        for entry in read_executions(execution_log)
        if entry["action"] == "flakyLookup"
    ]


def limit_trip_kinds(run_id: str) -> list[str]:
    return [event.payload["kind"] for event in run_events(run_id) if event.type == "limit_trip"]


def assert_stop_message(result: str, *, action: str, count: int) -> None:
    assert result.startswith("STOP:"), result
    assert f"'{action}'" in result
    assert f"{count} times" in result


# --- the tool-call circuit breaker --------------------------------------------------------------


@pytest.mark.parametrize("version", [OLD_CLIENT, NEW_CLIENT])
def test_a_call_failing_three_times_is_not_executed_a_fourth_time(
    live_server_factory: Any, fake_upstream: FakeUpstream, execution_log: Path, version: str
) -> None:
    server = start_server(live_server_factory, fake_upstream, execution_log)
    fake_upstream.script(*[lookup("a")] * 4, {"text": "I could not look it up."})
    thread_id = f"thread-breaker-same-arguments-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Look up a")])

    turn = run_js(version, generate_command(server.url, data))

    assert turn["errors"] == []
    assert turn["final"]["status"]["code"] == "Success"
    assert typenames(turn) == [AE, RESULT] * 4 + [TEXT]
    calls = of_type(turn, AE)
    assert [json.loads(joined_content(call)) for call in calls] == [{"key": "a", "fail": True}] * 4
    answers = results(turn)
    assert [error_code_of(answer) for answer in answers[:3]] == ["HANDLER_ERROR"] * 3
    assert all("lookup of 'a' failed" in answer for answer in answers[:3])
    assert_stop_message(answers[3], action="flakyLookup", count=3)
    result_messages = of_type(turn, RESULT)
    assert result_messages[3]["actionExecutionId"] == calls[3]["id"]
    assert joined_content(of_type(turn, TEXT)[0]) == "I could not look it up."

    # The action really ran three times: the fourth call was answered without running it.
    assert executed_keys(execution_log) == [("a", True)] * 3
    model_requests = fake_upstream.requests()
    assert len(model_requests) == 5
    last_tool_message = tool_messages(model_requests[-1])[-1]
    assert last_tool_message["tool_call_id"] == calls[3]["id"]
    assert last_tool_message["content"] == answers[3]

    run = finished_run(turn["final"]["runId"])
    assert run.status == RunStatus.SUCCEEDED
    assert run.error_code == ""
    (trip,) = run.limit_trips
    assert trip["kind"] == TOOL_CIRCUIT_BREAKER
    assert trip["details"] == {"action": "flakyLookup", "count": 3}
    assert "flakyLookup" in trip["message"]
    assert limit_trip_kinds(str(run.pk)) == [TOOL_CIRCUIT_BREAKER]
    stored_results = [row.result for row in thread_rows(thread_id) if row.kind == "result"]
    assert stored_results == answers


def test_alternating_argument_sets_are_counted_apart(
    live_server_factory: Any, fake_upstream: FakeUpstream, execution_log: Path
) -> None:
    server = start_server(live_server_factory, fake_upstream, execution_log)
    fake_upstream.script(*[lookup("a"), lookup("b")] * 3, lookup("a"), {"text": "Both failed."})
    thread_id = "thread-breaker-alternating"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Look up a and b")])

    turn = run_js(OLD_CLIENT, generate_command(server.url, data))

    assert turn["errors"] == []
    assert typenames(turn) == [AE, RESULT] * 7 + [TEXT]
    answers = results(turn)
    # Six failures, three per argument set: none is stopped; the seventh call (a's fourth) is.
    assert [error_code_of(answer) for answer in answers[:6]] == ["HANDLER_ERROR"] * 6
    assert_stop_message(answers[6], action="flakyLookup", count=3)
    assert executed_keys(execution_log) == [("a", True), ("b", True)] * 3
    assert len(fake_upstream.requests()) == 8
    assert joined_content(of_type(turn, TEXT)[0]) == "Both failed."

    run = finished_run(turn["final"]["runId"])
    assert run.status == RunStatus.SUCCEEDED
    assert [trip["kind"] for trip in run.limit_trips] == [TOOL_CIRCUIT_BREAKER]


def test_a_success_clears_the_failure_count(
    live_server_factory: Any, fake_upstream: FakeUpstream, execution_log: Path
) -> None:
    server = start_server(live_server_factory, fake_upstream, execution_log)
    fake_upstream.script(
        lookup("a"),
        lookup("a"),
        lookup("a", fail=False),
        lookup("a"),
        lookup("a"),
        lookup("a"),
        lookup("a"),
        {"text": "It keeps failing."},
    )
    thread_id = "thread-breaker-success-resets"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Look up a, again")])

    turn = run_js(OLD_CLIENT, generate_command(server.url, data))

    assert turn["errors"] == []
    assert typenames(turn) == [AE, RESULT] * 7 + [TEXT]
    answers = results(turn)
    assert answers[2] == "found a"
    # Two failures, a success, then three failures counted from zero: all six ran. Without
    # the reset the first failure after the success would have been the third in a row.
    assert [error_code_of(answer) for answer in answers[3:6]] == ["HANDLER_ERROR"] * 3
    assert_stop_message(answers[6], action="flakyLookup", count=3)
    assert executed_keys(execution_log) == [("a", True)] * 2 + [("a", False)] + [("a", True)] * 3
    assert len(fake_upstream.requests()) == 8

    run = finished_run(turn["final"]["runId"])
    assert run.status == RunStatus.SUCCEEDED
    assert [trip["kind"] for trip in run.limit_trips] == [TOOL_CIRCUIT_BREAKER]


# --- the hard limits: empty tool calls and the iteration cap ------------------------------------


def test_empty_tool_calls_end_the_run_with_a_code_the_user_can_act_on(
    live_server_factory: Any, fake_upstream: FakeUpstream, execution_log: Path
) -> None:
    server = start_server(live_server_factory, fake_upstream, execution_log)
    directive = {
        "steps": [{"tool_calls": [{"name": "ping", "arguments": ""}]}],
        "repeat_last": True,
    }
    thread_id = "thread-breaker-empty-calls"
    data = generate_data(
        thread_id=thread_id,
        messages=[text_input("u1", f"Write the whole book\n{fake_line(directive)}")],
    )

    turn = run_js(OLD_CLIENT, generate_command(server.url, data))

    final = turn["final"]
    # Five empty calls ran (ping needs no arguments); the sixth ended the run unexecuted.
    assert typenames(turn) == [AE, RESULT] * 5 + [AE]
    assert results(turn) == ["pong"] * 5
    assert [joined_content(call) for call in of_type(turn, AE)] == [""] * 6
    assert len(read_executions(execution_log)) == 5
    assert len(fake_upstream.requests()) == 6
    # What react-core shows: the client converts the calls (empty arguments as {}).
    assert "messagesError" not in turn
    assert [message["arguments"] for message in turn["messages"][::2]] == [{}] * 6

    status = final["status"]
    assert status["__typename"] == "FailedResponseStatus"
    assert status["code"] == "Failed"
    details = status["details"]
    assert details["code"] == EMPTY_TOOL_CALLS_CODE
    assert details["count"] == 6
    description = details["description"]
    assert "split" in description and "smaller parts" in description
    assert "6 times" in description

    run = finished_run(final["runId"])
    assert run.status == RunStatus.FAILED
    assert run.error_code == EMPTY_TOOL_CALLS_CODE
    assert run.error_details["message"] == description
    (trip,) = run.limit_trips
    assert trip["kind"] == EMPTY_TOOL_CALLS_CODE
    assert trip["details"] == {"count": 6}
    assert limit_trip_kinds(str(run.pk)) == [EMPTY_TOOL_CALLS_CODE]


def test_a_model_that_never_stops_calling_tools_is_stopped_at_max_iterations(
    live_server_factory: Any, fake_upstream: FakeUpstream, execution_log: Path
) -> None:
    server = start_server(
        live_server_factory, fake_upstream, execution_log, COPILOT_RUNTIME_MAX_ITERATIONS="3"
    )
    directive = {"steps": [lookup("k", fail=False)], "repeat_last": True}
    thread_id = "thread-loop-max-iterations"
    data = generate_data(
        thread_id=thread_id,
        messages=[text_input("u1", f"Look k up forever\n{fake_line(directive)}")],
    )

    turn = run_js(OLD_CLIENT, generate_command(server.url, data))

    final = turn["final"]
    assert typenames(turn) == [AE, RESULT] * 3
    assert results(turn) == ["found k"] * 3
    assert len(fake_upstream.requests()) == 3
    assert executed_keys(execution_log) == [("k", False)] * 3

    status = final["status"]
    assert status["__typename"] == "FailedResponseStatus"
    assert status["details"]["code"] == MAX_ITERATIONS_CODE
    assert status["details"]["maxIterations"] == 3
    assert "max_iterations" in status["details"]["description"]
    assert "3 model calls" in status["details"]["description"]

    run = finished_run(final["runId"])
    assert run.status == RunStatus.FAILED
    assert run.error_code == MAX_ITERATIONS_CODE
    (trip,) = run.limit_trips
    assert trip["kind"] == "max_iterations"
    assert trip["details"] == {"maxIterations": 3}
    assert limit_trip_kinds(str(run.pk)) == ["max_iterations"]


# --- the todo policy ----------------------------------------------------------------------------


def test_the_todo_policy_keeps_the_agent_working_until_its_todos_are_done(
    live_server_factory: Any, fake_upstream: FakeUpstream, execution_log: Path
) -> None:
    server = start_server(
        live_server_factory,
        fake_upstream,
        execution_log,
        COPILOT_RUNTIME_LOOP=json.dumps(
            {"should_continue": "todos", "next_message_role": "developer"}
        ),
        # The reminder keeps its role on the way to the model (auto would send the loopback
        # fake system).
        COPILOT_RUNTIME_OPENAI_SYSTEM_ROLE="developer",
    )
    done = [{"title": "write", "done": True}]
    fake_upstream.script(
        {"text": "I think I am finished."},
        {"tool_calls": [{"name": "update_todos", "arguments": {"todos": done}}]},
        {"text": "The writing is done."},
    )
    thread_id = "thread-loop-todos"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Please write")])
    data["agentStates"] = [
        {
            "agentName": "default",
            "state": json.dumps({"todos": [{"title": "write", "done": False}]}),
        }
    ]

    turn = run_js(OLD_CLIENT, generate_command(server.url, data))

    assert turn["errors"] == []
    final = turn["final"]
    assert final["status"]["code"] == "Success"
    assert typenames(turn) == [TEXT, TEXT, AE, AGENT_STATE, RESULT, TEXT]
    first_answer, reminder, call, snapshot, saved, last_answer = final["messages"]
    # The model answered in text while "write" was open: the loop went on with a reminder.
    assert joined_content(first_answer) == "I think I am finished."
    assert first_answer["role"] == "assistant"
    assert reminder["role"] == "developer"
    reminder_text = joined_content(reminder)
    assert "- write" in reminder_text
    assert "1 open todo item" in reminder_text
    assert "update_todos" in reminder_text
    assert call["name"] == "update_todos"
    assert json.loads(snapshot["state"]) == {"todos": done}
    assert snapshot["agentName"] == "default"
    assert saved["actionExecutionId"] == call["id"]
    assert "0 open item" in saved["result"]
    assert joined_content(last_answer) == "The writing is done."

    first_request, second_request, third_request = fake_upstream.requests()
    assert "update_todos" in {tool["function"]["name"] for tool in first_request["tools"]}
    assert second_request["messages"][-2:] == [
        {"role": "assistant", "content": "I think I am finished."},
        {"role": "developer", "content": reminder_text},
    ]
    assert tool_messages(third_request)[-1]["content"] == saved["result"]

    run = finished_run(final["runId"])
    assert run.status == RunStatus.SUCCEEDED
    assert run.limit_trips == []
    rows = thread_rows(thread_id)
    assert [(row.kind, row.role) for row in rows] == [
        ("text", "user"),
        ("text", "assistant"),
        ("text", "developer"),
        ("action_execution", "assistant"),
        ("result", "tool"),
        ("text", "assistant"),
    ]
    assert rows[2].content == reminder_text

    reloaded = run_js(
        OLD_CLIENT,
        {
            "op": "loadAgentState",
            "url": server.url + GRAPHQL_PATH,
            "threadId": thread_id,
            "agentName": "default",
        },
    )
    assert reloaded["errors"] == []
    assert reloaded["data"]["loadAgentState"]["threadExists"] is True
    assert reloaded["state"] == {"todos": done}


# --- approvals ----------------------------------------------------------------------------------


def approval_sequence(server: ServedProcess, thread_id: str, answer: Any) -> dict[str, Any]:
    """The first turn (the model calls serverAdd), then the client's answer as a follow-up."""
    first = generate_data(thread_id=thread_id, messages=[text_input("u1", "Add 1 and 2")])
    return {
        "op": "sequence",
        "url": server.url + GRAPHQL_PATH,
        "commands": [
            {"op": "generate", "data": first},
            {"op": "generate", "followUp": {"actionResults": {"serverAdd": answer}}},
        ],
    }


def start_approval_server(
    live_server_factory: Any, fake_upstream: FakeUpstream, execution_log: Path
) -> ServedProcess:
    return start_server(
        live_server_factory,
        fake_upstream,
        execution_log,
        actions=APPROVAL_ACTIONS,
        COPILOT_RUNTIME_APPROVAL_REQUIRED_ACTIONS="serverAdd",
    )


ADD_CALL = {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 2}}]}


@pytest.mark.parametrize(
    ("version", "answer"), [(OLD_CLIENT, "approved"), (NEW_CLIENT, {"approved": True})]
)
def test_an_approved_call_is_executed_by_the_server_on_the_follow_up(
    live_server_factory: Any,
    fake_upstream: FakeUpstream,
    execution_log: Path,
    version: str,
    answer: Any,
) -> None:
    server = start_approval_server(live_server_factory, fake_upstream, execution_log)
    fake_upstream.script(ADD_CALL, {"text": "The sum is 3."})
    thread_id = f"thread-approval-approved-{version}"

    first_turn, second_turn = run_js(version, approval_sequence(server, thread_id, answer))[
        "results"
    ]

    assert first_turn["errors"] == second_turn["errors"] == []
    # The first response ends with the call: no result, the action waits for the user.
    assert typenames(first_turn) == [AE]
    assert first_turn["final"]["status"]["code"] == "Success"
    (call,) = first_turn["final"]["messages"]
    assert call["name"] == "serverAdd"
    assert json.loads(joined_content(call)) == {"a": 1, "b": 2}
    first_run = finished_run(first_turn["final"]["runId"])
    assert not [event for event in run_events(str(first_run.pk)) if event.type == "action_result"]

    # The follow-up carries the decision: the server runs the action, then the model answers.
    assert typenames(second_turn) == [RESULT, TEXT]
    result, text = second_turn["final"]["messages"]
    assert result["result"] == '{"sum":3}'
    assert result["actionExecutionId"] == call["id"]
    assert result["actionName"] == "serverAdd"
    assert joined_content(text) == "The sum is 3."
    assert second_turn["final"]["status"]["code"] == "Success"
    assert read_executions(execution_log) == [
        {"action": "serverAdd", "arguments": {"a": 1, "b": 2}}
    ]

    first_request, follow_up_request = fake_upstream.requests()
    assert "serverAdd" in {tool["function"]["name"] for tool in first_request["tools"]}
    (tool_message,) = tool_messages(follow_up_request)
    assert tool_message == {"role": "tool", "tool_call_id": call["id"], "content": '{"sum":3}'}
    assert finished_run(second_turn["final"]["runId"]).status == RunStatus.SUCCEEDED


def test_a_rejected_call_is_never_executed_and_the_model_hears_why(
    live_server_factory: Any, fake_upstream: FakeUpstream, execution_log: Path
) -> None:
    server = start_approval_server(live_server_factory, fake_upstream, execution_log)
    fake_upstream.script(ADD_CALL, {"text": "Understood, I will not add them."})
    thread_id = "thread-approval-rejected"
    rejection = {"approved": False, "reason": "no"}

    first_turn, second_turn = run_js(OLD_CLIENT, approval_sequence(server, thread_id, rejection))[
        "results"
    ]

    assert first_turn["errors"] == second_turn["errors"] == []
    assert typenames(first_turn) == [AE]
    (call,) = first_turn["final"]["messages"]
    assert typenames(second_turn) == [RESULT, TEXT]
    result, text = second_turn["final"]["messages"]
    assert result["actionExecutionId"] == call["id"]
    assert "rejected" in result["result"]
    assert "'serverAdd'" in result["result"]
    assert "Reason: no" in result["result"]
    assert joined_content(text) == "Understood, I will not add them."

    _first_request, follow_up_request = fake_upstream.requests()
    (tool_message,) = tool_messages(follow_up_request)
    assert tool_message["tool_call_id"] == call["id"]
    assert tool_message["content"] == result["result"]
    assert read_executions(execution_log) == []
    assert finished_run(second_turn["final"]["runId"]).status == RunStatus.SUCCEEDED
