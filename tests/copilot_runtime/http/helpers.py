"""Posting to ``/api/copilotkit`` through Django's test client, and checking the answers."""

from __future__ import annotations

from typing import Any

import orjson
from django.http import HttpResponse
from django.test import Client

ENDPOINT = "/api/copilotkit"

LOAD_AGENT_STATE = """
query loadAgentState($data: LoadAgentStateInput!) {
  loadAgentState(data: $data) {
    threadId
    threadExists
    state
    messages
  }
}
"""

AVAILABLE_AGENTS = """
query availableAgents {
  availableAgents {
    agents {
      name
      id
      description
    }
  }
}
"""


def post_json(
    client: Client, payload: Any, *, headers: dict[str, str] | None = None
) -> HttpResponse:
    return client.post(
        ENDPOINT,
        data=orjson.dumps(payload),
        content_type="application/json",
        headers=headers or {},
    )


def post_graphql(
    client: Client,
    query: str,
    variables: dict[str, Any] | None = None,
    *,
    operation_name: str | None = None,
    headers: dict[str, str] | None = None,
) -> HttpResponse:
    payload: dict[str, Any] = {"query": query}
    if variables is not None:
        payload["variables"] = variables
    if operation_name is not None:
        payload["operationName"] = operation_name
    return post_json(client, payload, headers=headers)


def load_agent_state(
    client: Client,
    *,
    thread_id: str,
    agent_name: str = "default",
    headers: dict[str, str] | None = None,
) -> HttpResponse:
    return post_graphql(
        client,
        LOAD_AGENT_STATE,
        {"data": {"threadId": thread_id, "agentName": agent_name}},
        headers=headers,
    )


def body_of(response: HttpResponse) -> Any:
    return orjson.loads(response.content)


def assert_no_traceback(response: HttpResponse) -> None:
    """Never a 500, never a stack trace on the wire."""
    assert response.status_code != 500
    assert b"Traceback" not in response.content
    assert b'File "' not in response.content


def error_code(response: HttpResponse) -> str:
    """The ``extensions.code`` of a GraphQL answer's first error (HTTP 200)."""
    assert response.status_code == 200, response.content
    errors = body_of(response).get("errors")
    assert errors, f"expected GraphQL errors, got {response.content!r}"
    return errors[0]["extensions"]["code"]
