"""hello, availableAgents and loadAgentState through the general executor."""

from __future__ import annotations

import json
import logging
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.test import override_settings

from agents.registry import AgentSpec
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.error_format import UNEXPECTED_ERROR_MESSAGE
from tests.copilot_runtime.graphql.helpers import document, execute_single

HELPER_AGENTS = {"AGENTS": {"helper": {"description": "d", "kind": "python"}}}


@dataclass
class LoadedAgentState:
    thread_id: str
    thread_exists: bool
    state: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def selector_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Stand in for ``copilot_runtime.graphql.agent_state.agent_state_load`` (no database)."""
    calls: list[dict[str, Any]] = []
    answers: dict[str, LoadedAgentState] = {
        "thread-1": LoadedAgentState(
            thread_id="thread-1",
            thread_exists=True,
            state={"counter": 1, "text": "é"},
            messages=[{"id": "m1", "role": "user", "content": "Hi"}],
        ),
    }

    def agent_state_load(*, thread_id: str, agent_name: str, user: Any) -> LoadedAgentState:
        calls.append({"thread_id": thread_id, "agent_name": agent_name, "user": user})
        if thread_id == "explode":
            raise RuntimeError("database password is hunter2")
        return answers.get(thread_id, LoadedAgentState(thread_id=thread_id, thread_exists=False))

    module = types.ModuleType("copilot_runtime.graphql.agent_state")
    module.agent_state_load = agent_state_load  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "copilot_runtime.graphql.agent_state", module)
    return calls


async def test_hello(context: RuntimeContext) -> None:
    assert await execute_single(context, "{ hello }") == {"data": {"hello": "Hello World"}}


@override_settings(COPILOT_RUNTIME=HELPER_AGENTS)
async def test_available_agents_lists_default_then_configured(context: RuntimeContext) -> None:
    result = await execute_single(context, document("available_agents.urql"))
    default_id = AgentSpec(name="default", description="", kind="chat").id
    helper_id = AgentSpec(name="helper", description="", kind="python").id
    agents = result["data"]["availableAgents"]["agents"]
    assert result["data"]["availableAgents"]["__typename"] == "AgentsResponse"
    assert [(a["name"], a["id"], a["__typename"]) for a in agents] == [
        ("default", default_id, "Agent"),
        ("helper", helper_id, "Agent"),
    ]
    assert agents[1]["description"] == "d"
    assert "errors" not in result


async def test_load_agent_state_returns_json_text(
    context: RuntimeContext, selector_calls: list[dict[str, Any]]
) -> None:
    result = await execute_single(
        context,
        document("load_agent_state.urql"),
        {"data": {"threadId": "thread-1", "agentName": "default"}},
        "loadAgentState",
    )
    assert result == {
        "data": {
            "loadAgentState": {
                "threadId": "thread-1",
                "threadExists": True,
                "state": '{"counter":1,"text":"é"}',
                "messages": '[{"id":"m1","role":"user","content":"Hi"}]',
                "__typename": "LoadAgentStateResponse",
            }
        }
    }
    assert selector_calls == [
        {"thread_id": "thread-1", "agent_name": "default", "user": context.user}
    ]


async def test_load_agent_state_of_unknown_thread_is_empty_json(
    context: RuntimeContext, selector_calls: list[dict[str, Any]]
) -> None:
    result = await execute_single(
        context,
        document("load_agent_state"),
        {"data": {"threadId": "nope", "agentName": "default"}},
    )
    assert result["data"]["loadAgentState"] == {
        "threadId": "nope",
        "threadExists": False,
        "state": "{}",
        "messages": "[]",
    }


async def test_load_agent_state_of_unknown_agent_is_agent_not_found(
    context: RuntimeContext, selector_calls: list[dict[str, Any]]
) -> None:
    result = await execute_single(
        context,
        document("load_agent_state"),
        {"data": {"threadId": "thread-1", "agentName": "ghost"}},
    )
    assert result["data"] is None
    [error] = result["errors"]
    assert "ghost" in error["message"]
    assert error["path"] == ["loadAgentState"]
    assert error["locations"] == [{"line": 2, "column": 3}]
    assert error["extensions"] == {
        "name": "CopilotKitAgentDiscoveryError",
        "statusCode": 500,
        "code": "AGENT_NOT_FOUND",
        "visibility": "banner",
        "severity": "critical",
        "troubleshootingUrl": None,
    }
    assert "Traceback" not in json.dumps(result)
    assert selector_calls == []


async def test_unexpected_selector_failure_is_masked_and_logged(
    context: RuntimeContext,
    selector_calls: list[dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="copilot_runtime.graphql"):
        result = await execute_single(
            context,
            document("load_agent_state"),
            {"data": {"threadId": "explode", "agentName": "default"}},
        )
    [error] = result["errors"]
    assert error["message"] == UNEXPECTED_ERROR_MESSAGE
    assert error["extensions"]["code"] == "UNKNOWN"
    assert "hunter2" not in json.dumps(result)
    assert "Traceback" not in json.dumps(result)
    # The server log has the real error and its traceback.
    [record] = [r for r in caplog.records if r.name == "copilot_runtime.graphql"]
    assert record.exc_info is not None and "hunter2" in str(record.exc_info[1])
