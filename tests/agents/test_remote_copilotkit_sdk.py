"""A real CopilotKit remote endpoint: PyPI ``copilotkit`` 0.1.96 served by uvicorn on loopback.

Remote actions are discovered and offered to the chat engine, executed through the endpoint
(a failing one comes back as the action's error), its agent runs through ``/agents/execute``
(state, an interrupt and its answer), and ``/agents/state`` answers for it.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from conversations.models import AgentState, RunStatus
from copilot_runtime.events import ActionResult, MetaEvent, RunError
from tests.support.agent_turns import agent_request, run_turn, streamed_text, text
from tests.support.copilotkit_sdk_app import (
    ENDPOINT_PREFIX,
    REMOTE_FAILURE,
    ScriptedAgent,
    copilotkit_sdk_app,
)
from tests.support.peer_servers import UvicornServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def sdk_server() -> Iterator[UvicornServer]:
    with UvicornServer(copilotkit_sdk_app()) as server:
        yield server


def _settings(endpoint_url: str, fake_base_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": fake_base_url,
        "OPENAI_MAX_RETRIES": 0,
        "EVENT_FLUSH_MS": 5,
        "ACTIONS": ["tests.support.actions.server_add"],
        "REMOTE_RETRY_BASE_SECONDS": 0.01,
        "REMOTE_RETRY_MAX_SECONDS": 0.02,
        "REMOTE_ENDPOINTS": [{"name": "python-sdk", "url": endpoint_url}],
        "AGENTS": {"scripted": {"kind": "remote", "endpoint": "python-sdk"}},
        **extra,
    }


@pytest.fixture
def on_sdk(sdk_server: UvicornServer, fake_upstream) -> Iterator[None]:
    ScriptedAgent.received.clear()
    url = sdk_server.url + ENDPOINT_PREFIX
    with override_settings(COPILOT_RUNTIME=_settings(url, fake_upstream.base_url)):
        yield


async def test_remote_actions_are_discovered_offered_and_executed(
    on_sdk: None, fake_upstream
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "remoteGreet", "arguments": {"name": "Ann"}}]},
        {"text": "Greeted."},
    )

    events, run = await run_turn(agent_request("default", [text("u1", "greet Ann")]))

    assert run.status == RunStatus.SUCCEEDED
    first = fake_upstream.requests()[0]
    tools = {tool["function"]["name"]: tool["function"] for tool in first["tools"]}
    assert set(tools) == {"serverAdd", "remoteGreet", "remoteFail"}
    assert tools["remoteGreet"]["description"] == "Greets someone, remotely."
    assert tools["remoteGreet"]["parameters"] == {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Who"}},
        "required": ["name"],
    }
    (result,) = [e for e in events if isinstance(e, ActionResult)]
    assert (result.action_name, json.loads(result.result), result.is_error) == (
        "remoteGreet",
        {"greeting": "Hello, Ann!"},
        False,
    )
    assert streamed_text(events) == "Greeted."


async def test_a_failing_remote_action_is_the_actions_error_and_the_turn_goes_on(
    on_sdk: None, fake_upstream
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "remoteFail", "arguments": {}}]},
        {"text": "It failed, sorry."},
    )

    events, run = await run_turn(agent_request("default", [text("u1", "fail please")]))

    assert run.status == RunStatus.SUCCEEDED
    (result,) = [e for e in events if isinstance(e, ActionResult)]
    assert result.is_error
    error = json.loads(result.result)["error"]
    assert error["code"] == "HANDLER_ERROR"
    assert "remote endpoint 'python-sdk'" in error["message"]
    assert REMOTE_FAILURE in error["message"]
    # The model saw the error as the tool result.
    tool_message = fake_upstream.requests()[1]["messages"][-1]
    assert tool_message["role"] == "tool" and REMOTE_FAILURE in tool_message["content"]


async def test_a_down_endpoint_fails_the_chat_turn_naming_it(fake_upstream) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/copilotkit"
    with override_settings(COPILOT_RUNTIME=_settings(url, fake_upstream.base_url)):
        events, run = await run_turn(agent_request("default", [text("u1", "hi")]))

    assert run.status == RunStatus.FAILED
    error = next(e for e in events if isinstance(e, RunError))
    assert f"remote endpoint 'python-sdk' ({url}) is unreachable" in error.message
    assert fake_upstream.requests() == []


async def test_the_remote_agent_streams_keeps_state_and_resumes_after_an_interrupt(
    on_sdk: None,
) -> None:
    events, run = await run_turn(agent_request("scripted", [text("u1", "hello there")]))

    assert run.status == RunStatus.SUCCEEDED
    assert streamed_text(events) == "Echo: hello there"
    (received,) = ScriptedAgent.received
    assert received["thread_id"] == "agent-thread"
    assert received["messages"][0]["content"] == "hello there"
    assert {a["name"] for a in received["actions"]} >= {"serverAdd", "remoteGreet"}

    history = [text("u1", "hello there"), text("u2", "please interrupt")]
    events, run = await run_turn(agent_request("scripted", history))

    assert run.status == RunStatus.INTERRUPTED
    (interrupt,) = [e for e in events if isinstance(e, MetaEvent)]
    assert json.loads(interrupt.value) == {"question": "Proceed?"}
    # The state the previous run left was sent back.
    assert ScriptedAgent.received[-1]["state"] == {"turns": 1}

    events, run = await run_turn(
        agent_request(
            "scripted",
            history,
            meta_events=[
                {"name": "LangGraphInterruptEvent", "value": interrupt.value, "response": "go"}
            ],
        )
    )

    assert run.status == RunStatus.SUCCEEDED
    assert streamed_text(events) == "You answered: go"
    assert ScriptedAgent.received[-1]["meta_events"] == [
        {"name": "LangGraphInterruptEvent", "value": interrupt.value, "response": "go"}
    ]
    latest = await AgentState.objects.filter(agent_name="scripted").alatest("id")
    assert latest.state == {"turns": 3, "answer": "go"}
