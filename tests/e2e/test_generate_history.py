"""``generateCopilotResponse`` end to end: stored history, regenerate, and ``loadAgentState``.

The real CopilotKit client (both pinned versions) chats with the served process, then reloads
the thread the way react-core does on page load (``loadAgentState`` for agent ``default``, its
``messages`` JSON handed to ``loadMessagesFromJsonRepresentation``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import RunStatus
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    GRAPHQL_PATH,
    finished_run,
    generate_command,
    generate_data,
    joined_content,
    text_input,
    thread_rows,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

versions = pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)


def load_agent_state(server: ServedProcess, version: str, thread_id: str) -> dict[str, Any]:
    command = {
        "op": "loadAgentState",
        "url": server.url + GRAPHQL_PATH,
        "threadId": thread_id,
        "agentName": "default",
    }
    return run_js(version, command)


def text_history(messages: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(message["id"], message["role"], message["content"]) for message in messages]


@versions
def test_regenerate_supersedes_the_last_answer_and_reload_shows_the_new_one(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script(
        {"text": "First answer."},
        {"text": "Second answer."},
        {"text": "Regenerated answer."},
    )
    thread_id = f"thread-regenerate-{version}"
    two_turns = {
        "op": "sequence",
        "url": server.url + GRAPHQL_PATH,
        "commands": [
            {
                "op": "generate",
                "data": generate_data(
                    thread_id=thread_id, messages=[text_input("u1", "First question")]
                ),
            },
            {"op": "generate", "followUp": {"userText": "Second question"}},
        ],
    }
    first_turn, second_turn = run_js(version, two_turns)["results"]
    first_answer = first_turn["final"]["messages"][0]
    second_answer = second_turn["final"]["messages"][0]
    second_sent = second_turn["sentData"]
    user_two_id = second_sent["messages"][2]["id"]
    assert joined_content(second_answer) == "Second answer."
    finished_run(second_turn["final"]["runId"])

    # Regenerate: the client drops the last answer and resends the history before it.
    truncated = {**second_sent, "runId": second_turn["final"]["runId"]}
    regenerated = run_js(version, generate_command(server.url, truncated))

    assert regenerated["errors"] == []
    (new_answer,) = regenerated["final"]["messages"]
    assert joined_content(new_answer) == "Regenerated answer."
    assert new_answer["id"] != second_answer["id"]
    assert finished_run(regenerated["final"]["runId"]).status == RunStatus.SUCCEEDED
    third_request = fake_upstream.requests()[2]
    assert [(m["role"], m["content"]) for m in third_request["messages"]] == [
        ("user", "First question"),
        ("assistant", "First answer."),
        ("user", "Second question"),
    ]

    every_row = thread_rows(thread_id, include_superseded=True)
    assert [(row.message_id, row.superseded) for row in every_row] == [
        ("u1", False),
        (first_answer["id"], False),
        (user_two_id, False),
        (second_answer["id"], True),  # kept, not deleted
        (new_answer["id"], False),
    ]
    assert every_row[3].content == "Second answer."

    reloaded = load_agent_state(server, version, thread_id)

    assert reloaded["errors"] == []
    assert reloaded["data"]["loadAgentState"]["threadExists"] is True
    assert text_history(reloaded["messages"]) == [
        ("u1", "user", "First question"),
        (first_answer["id"], "assistant", "First answer."),
        (user_two_id, "user", "Second question"),
        (new_answer["id"], "assistant", "Regenerated answer."),
    ]


@versions
def test_load_agent_state_returns_the_chat_in_order(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 2}}]},
        {"text": "It is 3."},
    )
    thread_id = f"thread-load-state-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "What is 1 + 2?")])
    chat = run_js(version, generate_command(server.url, data))
    assert chat["errors"] == []
    call, action_result, answer = chat["final"]["messages"]
    finished_run(chat["final"]["runId"])

    reloaded = load_agent_state(server, version, thread_id)

    assert reloaded["errors"] == []
    payload = reloaded["data"]["loadAgentState"]
    assert payload["threadId"] == thread_id
    assert payload["threadExists"] is True
    assert reloaded["state"] == {}
    messages = reloaded["messages"]
    assert [message["type"] for message in messages] == [
        "TextMessage",
        "ActionExecutionMessage",
        "ResultMessage",
        "TextMessage",
    ]
    user, loaded_call, loaded_result, loaded_answer = messages
    assert (user["id"], user["role"], user["content"]) == ("u1", "user", "What is 1 + 2?")
    assert loaded_call["id"] == call["id"]
    assert loaded_call["name"] == "serverAdd"
    assert loaded_call["arguments"] == {"a": 1, "b": 2}
    assert loaded_result["actionExecutionId"] == call["id"]
    assert loaded_result["actionName"] == "serverAdd"
    assert loaded_result["result"] == '{"sum":3}'
    assert loaded_result["id"] == action_result["id"]
    assert (loaded_answer["id"], loaded_answer["role"], loaded_answer["content"]) == (
        answer["id"],
        "assistant",
        "It is 3.",
    )


@versions
def test_load_agent_state_of_an_unknown_thread_is_empty(
    server: ServedProcess, version: str
) -> None:
    reloaded = load_agent_state(server, version, f"thread-never-used-{version}")

    assert reloaded["errors"] == []
    payload = reloaded["data"]["loadAgentState"]
    assert payload["threadExists"] is False
    assert payload["messages"] == "[]"
    assert reloaded["messages"] == []
    assert reloaded["state"] == {}
