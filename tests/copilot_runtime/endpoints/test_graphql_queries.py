"""``hello``, ``availableAgents`` and ``loadAgentState`` through the real endpoint."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest
from django.test import AsyncClient, Client, override_settings

from tests.conversations.factories import message_row, state_row, thread_create
from tests.copilot_runtime.http.helpers import (
    AVAILABLE_AGENTS,
    ENDPOINT,
    assert_no_traceback,
    body_of,
    error_code,
    load_agent_state,
    post_graphql,
)

pytestmark = pytest.mark.django_db

AGENT_ID_NAMESPACE = uuid.UUID("6f1d9a52-3c1e-4d5b-9a0e-0c7b1f2e8d41")
AGENTS = {
    "AGENTS": {
        "researcher": {"description": "Finds sources", "kind": "python"},
        "planner": {"description": "Plans trips"},
    }
}


def loaded(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.content
    body = body_of(response)
    assert "errors" not in body, body
    return body["data"]["loadAgentState"]


# --- hello ------------------------------------------------------------------------------------


def test_hello_answers_exactly(client: Client) -> None:
    response = client.post(ENDPOINT, data=b'{"query":"{hello}"}', content_type="application/json")

    assert response.status_code == 200
    assert response.content == b'{"data":{"hello":"Hello World"}}'
    assert response["Content-Type"].startswith("application/graphql-response+json")


async def test_hello_answers_over_the_async_client() -> None:
    response = await AsyncClient().post(
        ENDPOINT, data=b'{"query":"{hello}"}', content_type="application/json"
    )

    assert response.status_code == 200
    assert response.content == b'{"data":{"hello":"Hello World"}}'


def test_hello_answers_plain_json_to_a_json_only_client(client: Client) -> None:
    response = post_graphql(client, "{ hello }", headers={"Accept": "application/json"})

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert body_of(response) == {"data": {"hello": "Hello World"}}


def test_the_named_operation_is_the_one_run(client: Client) -> None:
    response = post_graphql(
        client,
        "query first { hello } query second { __typename }",
        operation_name="second",
    )

    assert body_of(response) == {"data": {"__typename": "Query"}}


# --- availableAgents --------------------------------------------------------------------------


def test_available_agents_lists_default_first_with_a_stable_id(client: Client) -> None:
    first = body_of(post_graphql(client, AVAILABLE_AGENTS))
    second = body_of(post_graphql(client, AVAILABLE_AGENTS))

    agents = first["data"]["availableAgents"]["agents"]
    assert agents[0]["name"] == "default"
    assert agents[0]["id"] == str(uuid.uuid5(AGENT_ID_NAMESPACE, "default"))
    assert first == second


@override_settings(COPILOT_RUNTIME=AGENTS)
def test_available_agents_lists_configured_agents(client: Client) -> None:
    agents = body_of(post_graphql(client, AVAILABLE_AGENTS))["data"]["availableAgents"]["agents"]

    assert [(a["name"], a["description"]) for a in agents[1:]] == [
        ("planner", "Plans trips"),
        ("researcher", "Finds sources"),
    ]
    assert agents[0]["name"] == "default"
    assert agents[1]["id"] == str(uuid.uuid5(AGENT_ID_NAMESPACE, "planner"))


# --- loadAgentState ---------------------------------------------------------------------------


def test_load_agent_state_returns_stored_messages_and_state(client: Client) -> None:
    thread = thread_create(thread_id="thread-with-history")
    message_row(thread=thread, position=0, message_id="u1", role="user", content="Hi")
    message_row(
        thread=thread,
        position=1,
        message_id="a1",
        role="assistant",
        content="Hello, how can I help?",
    )
    message_row(
        thread=thread,
        position=2,
        message_id="a0",
        role="assistant",
        content="an older answer",
        superseded=True,
    )
    state_row(thread=thread, state={"step": 1})
    state_row(thread=thread, state={"step": 2, "city": "Lisbon"})

    result = loaded(load_agent_state(client, thread_id="thread-with-history"))

    assert result["threadId"] == "thread-with-history"
    assert result["threadExists"] is True
    assert isinstance(result["state"], str)
    assert isinstance(result["messages"], str)
    assert orjson.loads(result["state"]) == {"step": 2, "city": "Lisbon"}
    messages = orjson.loads(result["messages"])
    assert [(m["id"], m["role"], m["content"]) for m in messages] == [
        ("u1", "user", "Hi"),
        ("a1", "assistant", "Hello, how can I help?"),
    ]
    assert all(m["createdAt"].endswith("Z") for m in messages)


def test_load_agent_state_of_an_unknown_thread(client: Client) -> None:
    result = loaded(load_agent_state(client, thread_id="never-seen"))

    assert result == {
        "threadId": "never-seen",
        "threadExists": False,
        "state": "{}",
        "messages": "[]",
    }


def test_load_agent_state_of_an_existing_empty_thread(client: Client) -> None:
    thread_create(thread_id="empty-thread")

    result = loaded(load_agent_state(client, thread_id="empty-thread"))

    assert result == {
        "threadId": "empty-thread",
        "threadExists": True,
        "state": "{}",
        "messages": "[]",
    }


def test_load_agent_state_of_an_unknown_agent_is_agent_not_found(client: Client) -> None:
    thread_create(thread_id="some-thread")

    response = load_agent_state(client, thread_id="some-thread", agent_name="no-such-agent")

    assert_no_traceback(response)
    assert error_code(response) == "AGENT_NOT_FOUND"
    assert "no-such-agent" in body_of(response)["errors"][0]["message"]


@override_settings(COPILOT_RUNTIME=AGENTS)
def test_load_agent_state_reads_the_named_agents_state(client: Client) -> None:
    thread = thread_create(thread_id="multi-agent")
    state_row(thread=thread, state={"who": "default"})
    state_row(thread=thread, state={"who": "planner"}, agent_name="planner")

    result = loaded(load_agent_state(client, thread_id="multi-agent", agent_name="planner"))

    assert orjson.loads(result["state"]) == {"who": "planner"}
