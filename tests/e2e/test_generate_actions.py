"""``generateCopilotResponse`` end to end with actions: server-side, failing, and frontend ones.

The real CopilotKit client (both pinned versions) drives our served process; the fake OpenAI
upstream is scripted to call tools, and its recorded requests show what the model was sent.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import RunStatus
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    GRAPHQL_PATH,
    SAY_HELLO_ACTION,
    finished_run,
    generate_command,
    generate_data,
    joined_content,
    server_env,
    text_input,
    thread_rows,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

versions = pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)


def typenames(result: dict[str, Any]) -> list[str]:
    return [message["__typename"] for message in result["final"]["messages"]]


def tool_messages(model_request: dict[str, Any]) -> list[dict[str, Any]]:
    return [message for message in model_request["messages"] if message["role"] == "tool"]


def assistant_tool_calls(model_request: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        call
        for message in model_request["messages"]
        if message["role"] == "assistant"
        for call in message.get("tool_calls") or []
    ]


@versions
def test_server_action_result_then_final_text(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script(
        # Paced (20 ms a fragment), so the fragments reach the runtime in reads of their own:
        # fragments that arrive in one read go out as one.
        {
            "tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 2}, "fragments": 3}],
            "delay_ms": 20,
        },
        {"text": "The sum is 3."},
    )
    thread_id = f"thread-server-action-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Add 1 and 2")])

    result = run_js(version, generate_command(server.url, data))

    assert result["errors"] == []
    final = result["final"]
    assert final["status"]["code"] == "Success"
    assert typenames(result) == [
        "ActionExecutionMessageOutput",
        "ResultMessageOutput",
        "TextMessageOutput",
    ]
    call, action_result, text = final["messages"]
    assert call["name"] == "serverAdd"
    assert len(call["arguments"]) >= 2  # streamed in fragments, reassembled by the client
    assert json.loads(joined_content(call)) == {"a": 1, "b": 2}
    assert call["status"]["code"] == "Success"
    assert action_result["actionExecutionId"] == call["id"]
    assert action_result["actionName"] == "serverAdd"
    # Encoded as the TypeScript runtime encodes an object result: compact JSON text.
    assert action_result["result"] == '{"sum":3}'
    assert action_result["status"]["code"] == "Success"
    assert joined_content(text) == "The sum is 3."
    converted = {message["type"]: message for message in result["messages"]}
    assert converted["ActionExecutionMessage"]["arguments"] == {"a": 1, "b": 2}
    assert converted["ResultMessage"]["actionExecutionId"] == call["id"]

    first_request, second_request = fake_upstream.requests()
    offered = {tool["function"]["name"] for tool in first_request["tools"]}
    assert {"serverAdd", "always_fails"} <= offered
    (sent_call,) = assistant_tool_calls(second_request)
    assert sent_call["id"] == call["id"]
    assert sent_call["function"]["name"] == "serverAdd"
    assert json.loads(sent_call["function"]["arguments"]) == {"a": 1, "b": 2}
    (tool_message,) = tool_messages(second_request)
    assert tool_message["tool_call_id"] == call["id"]
    assert json.loads(tool_message["content"]) == {"sum": 3}

    run = finished_run(final["runId"])
    assert run.status == RunStatus.SUCCEEDED
    rows = thread_rows(thread_id)
    assert [(row.kind, row.role) for row in rows] == [
        ("text", "user"),
        ("action_execution", "assistant"),
        ("result", "tool"),
        ("text", "assistant"),
    ]
    assert rows[1].action_name == "serverAdd"
    assert rows[1].arguments == {"a": 1, "b": 2}
    assert json.loads(rows[2].result) == {"sum": 3}
    assert rows[2].action_execution_id == call["id"]
    assert rows[3].content == "The sum is 3."


@versions
def test_failing_server_action_becomes_an_error_result_and_the_turn_goes_on(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "always_fails", "arguments": {"reason": "kaboom"}}]},
        {"text": "That did not work."},
    )
    thread_id = f"thread-failing-action-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Try the broken one")])

    result = run_js(version, generate_command(server.url, data))

    assert result["errors"] == []
    assert result["final"]["status"]["code"] == "Success"
    assert typenames(result) == [
        "ActionExecutionMessageOutput",
        "ResultMessageOutput",
        "TextMessageOutput",
    ]
    _call, action_result, text = result["final"]["messages"]
    encoded = json.loads(action_result["result"])
    assert encoded["result"] == ""
    assert encoded["error"]["code"] == "HANDLER_ERROR"
    assert "kaboom" in encoded["error"]["message"]
    assert "Traceback" not in action_result["result"]
    assert joined_content(text) == "That did not work."

    (tool_message,) = tool_messages(fake_upstream.requests()[1])
    assert json.loads(tool_message["content"])["error"]["code"] == "HANDLER_ERROR"
    run = finished_run(result["final"]["runId"])
    assert run.status == RunStatus.SUCCEEDED
    assert [row.kind for row in thread_rows(thread_id)] == [
        "text",
        "action_execution",
        "result",
        "text",
    ]


@versions
def test_frontend_action_round_trip_with_follow_up_request(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "sayHello", "arguments": {"name": "Bob"}}]},
        {"text": "I greeted Bob."},
    )
    thread_id = f"thread-frontend-action-{version}"
    first = generate_data(
        thread_id=thread_id,
        messages=[text_input("u1", "Greet Bob")],
        actions=[SAY_HELLO_ACTION],
    )
    command = {
        "op": "sequence",
        "url": server.url + GRAPHQL_PATH,
        "commands": [
            {"op": "generate", "data": first},
            {"op": "generate", "followUp": {"actionResults": {"sayHello": "Said hello to Bob"}}},
        ],
    }

    first_turn, second_turn = run_js(version, command)["results"]

    assert first_turn["errors"] == second_turn["errors"] == []
    # The first response ends with the call: the server has no result for a frontend action.
    assert typenames(first_turn) == ["ActionExecutionMessageOutput"]
    (call,) = first_turn["final"]["messages"]
    assert call["name"] == "sayHello"
    assert json.loads(joined_content(call)) == {"name": "Bob"}
    assert first_turn["final"]["status"]["code"] == "Success"
    (converted_call,) = first_turn["messages"]
    assert converted_call["arguments"] == {"name": "Bob"}

    sent = second_turn["sentData"]["messages"]
    assert [message["id"] for message in sent[:2]] == ["u1", call["id"]]
    assert sent[2]["resultMessage"]["actionExecutionId"] == call["id"]
    assert typenames(second_turn) == ["TextMessageOutput"]
    assert joined_content(second_turn["final"]["messages"][0]) == "I greeted Bob."

    first_request, follow_up_request = fake_upstream.requests()
    assert "sayHello" in {tool["function"]["name"] for tool in first_request["tools"]}
    (sent_call,) = assistant_tool_calls(follow_up_request)
    assert sent_call["id"] == call["id"]
    assert sent_call["function"]["name"] == "sayHello"
    assert json.loads(sent_call["function"]["arguments"]) == {"name": "Bob"}
    (tool_message,) = tool_messages(follow_up_request)
    assert tool_message == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": "Said hello to Bob",
    }
    roles = [message["role"] for message in follow_up_request["messages"]]
    assert roles == ["user", "assistant", "tool"]

    first_run = finished_run(first_turn["final"]["runId"])
    second_run = finished_run(second_turn["final"]["runId"])
    assert first_run.status == second_run.status == RunStatus.SUCCEEDED
    rows = thread_rows(thread_id)
    assert [(row.kind, row.message_id) for row in rows] == [
        ("text", "u1"),
        ("action_execution", call["id"]),
        ("result", sent[2]["id"]),
        ("text", second_turn["final"]["messages"][0]["id"]),
    ]
    assert rows[2].result == "Said hello to Bob"


@versions
def test_a_tool_loop_stops_at_max_iterations(
    live_server_factory: Any, fake_upstream: FakeUpstream, version: str
) -> None:
    server = live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_MAX_ITERATIONS="2")
    )
    add = {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 2, "b": 2}}]}
    fake_upstream.script(add, add, add)
    thread_id = f"thread-max-iterations-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Keep adding")])

    result = run_js(version, generate_command(server.url, data))

    final = result["final"]
    assert typenames(result) == [
        "ActionExecutionMessageOutput",
        "ResultMessageOutput",
        "ActionExecutionMessageOutput",
        "ResultMessageOutput",
    ]
    assert [message["result"] for message in final["messages"][1::2]] == ['{"sum":4}'] * 2
    status = final["status"]
    assert status["__typename"] == "FailedResponseStatus"
    assert status["details"]["code"] == "MAX_ITERATIONS_REACHED"
    assert status["details"]["maxIterations"] == 2
    assert "MAX_ITERATIONS" in status["details"]["description"]
    assert len(fake_upstream.requests()) == 2

    run = finished_run(final["runId"])
    assert run.status == RunStatus.FAILED
    assert run.error_code == "MAX_ITERATIONS_REACHED"
    assert [row.kind for row in thread_rows(thread_id)] == [
        "text",
        "action_execution",
        "result",
        "action_execution",
        "result",
    ]


@versions
def test_text_then_frontend_action_follow_up_keeps_them_in_one_assistant_turn(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script(
        {
            "text": "Let me greet her.",
            "tool_calls": [{"name": "sayHello", "arguments": {"name": "Ada"}}],
        },
        {"text": "Done."},
    )
    thread_id = f"thread-text-and-action-{version}"
    first = generate_data(
        thread_id=thread_id, messages=[text_input("u1", "Greet Ada")], actions=[SAY_HELLO_ACTION]
    )
    command = {
        "op": "sequence",
        "url": server.url + GRAPHQL_PATH,
        "commands": [
            {"op": "generate", "data": first},
            {"op": "generate", "followUp": {"actionResults": {"sayHello": "Hello, Ada!"}}},
        ],
    }

    first_turn, second_turn = run_js(version, command)["results"]

    assert first_turn["errors"] == second_turn["errors"] == []
    assert typenames(first_turn) == ["TextMessageOutput", "ActionExecutionMessageOutput"]
    text, call = first_turn["final"]["messages"]
    assert joined_content(text) == "Let me greet her."
    assert call["parentMessageId"] == text["id"]
    assert joined_content(second_turn["final"]["messages"][0]) == "Done."

    follow_up_request = fake_upstream.requests()[1]
    assert [m["role"] for m in follow_up_request["messages"]] == ["user", "assistant", "tool"]
    assistant = follow_up_request["messages"][1]
    # The call is folded into the assistant message that announced it, as the model sent it.
    assert assistant["content"] == "Let me greet her."
    (sent_call,) = assistant["tool_calls"]
    assert sent_call["id"] == call["id"]
    assert follow_up_request["messages"][2]["tool_call_id"] == call["id"]

    finished_run(second_turn["final"]["runId"])
    rows = thread_rows(thread_id, include_superseded=True)
    assert [(row.kind, row.message_id) for row in rows] == [
        ("text", "u1"),
        ("text", text["id"]),
        ("action_execution", call["id"]),
        ("result", second_turn["sentData"]["messages"][3]["id"]),
        ("text", second_turn["final"]["messages"][0]["id"]),
    ]
    assert rows[2].parent_message_id == text["id"]
    assert not any(row.superseded for row in rows)


@versions
def test_server_and_frontend_action_in_one_response(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script(
        {
            "tool_calls": [
                {"name": "serverAdd", "arguments": {"a": 20, "b": 22}},
                {"name": "sayHello", "arguments": {"name": "Grace"}},
            ]
        },
        {"text": "Added and greeted."},
    )
    thread_id = f"thread-mixed-actions-{version}"
    first = generate_data(
        thread_id=thread_id,
        messages=[text_input("u1", "Add and greet")],
        actions=[SAY_HELLO_ACTION],
    )
    command = {
        "op": "sequence",
        "url": server.url + GRAPHQL_PATH,
        "commands": [
            {"op": "generate", "data": first},
            {"op": "generate", "followUp": {"actionResults": {"sayHello": "Hi Grace"}}},
        ],
    }

    first_turn, second_turn = run_js(version, command)["results"]

    assert first_turn["errors"] == second_turn["errors"] == []
    assert typenames(first_turn) == [
        "ActionExecutionMessageOutput",
        "ActionExecutionMessageOutput",
        "ResultMessageOutput",
    ]
    add_call, hello_call, add_result = first_turn["final"]["messages"]
    assert (add_call["name"], hello_call["name"]) == ("serverAdd", "sayHello")
    assert add_result["actionExecutionId"] == add_call["id"]
    assert add_result["result"] == '{"sum":42}'
    # The server stopped after its own action: the frontend one is the client's to run.
    assert len(fake_upstream.requests()) == 2
    assert joined_content(second_turn["final"]["messages"][0]) == "Added and greeted."

    follow_up_request = fake_upstream.requests()[1]
    assert sorted(call["id"] for call in assistant_tool_calls(follow_up_request)) == sorted(
        [add_call["id"], hello_call["id"]]
    )
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(follow_up_request)}
    assert results == {add_call["id"]: '{"sum":42}', hello_call["id"]: "Hi Grace"}
    assert len(tool_messages(follow_up_request)) == 2

    finished_run(second_turn["final"]["runId"])
    # The client resends the server's result after its own one: reordered, not superseded.
    rows = thread_rows(thread_id, include_superseded=True)
    assert [row.kind for row in rows] == [
        "text",
        "action_execution",
        "action_execution",
        "result",
        "result",
        "text",
    ]
    assert not any(row.superseded for row in rows)


IMMEDIATE_FOLLOW_UPS = 12


@versions
def test_follow_ups_sent_the_moment_a_response_ends_are_accepted(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    # react-core runs a frontend action as soon as the response ends and sends the follow-up
    # at once; the thread must be free by then (the previous run is over for the client).
    call = {"tool_calls": [{"name": "sayHello", "arguments": {"name": "Bob"}}]}
    fake_upstream.script(*([call] * IMMEDIATE_FOLLOW_UPS), {"text": "All greeted."})
    thread_id = f"thread-immediate-follow-ups-{version}"
    first = generate_data(
        thread_id=thread_id,
        messages=[text_input("u1", "Greet Bob often")],
        actions=[SAY_HELLO_ACTION],
    )
    follow_up = {"op": "generate", "followUp": {"actionResults": {"sayHello": "Hi Bob"}}}
    command = {
        "op": "sequence",
        "url": server.url + GRAPHQL_PATH,
        "commands": [{"op": "generate", "data": first}] + [follow_up] * IMMEDIATE_FOLLOW_UPS,
    }

    turns = run_js(version, command, timeout=120)["results"]

    busy = [index for index, turn in enumerate(turns) if turn["errors"]]
    assert busy == [], [turns[index]["errors"][0]["message"] for index in busy]
    assert [typenames(turn) for turn in turns[:-1]] == [
        ["ActionExecutionMessageOutput"]
    ] * IMMEDIATE_FOLLOW_UPS
    assert joined_content(turns[-1]["final"]["messages"][0]) == "All greeted."
    for turn in turns:
        assert finished_run(turn["final"]["runId"]).status == RunStatus.SUCCEEDED
