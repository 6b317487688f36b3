"""Python agents through the real CopilotKit GraphQL client (both pinned versions): state
streamed as ``AgentStateMessageOutput`` and loaded back, and a ``CopilotKitLangGraphInterruptEvent``
(value and messages) that urql reassembles and whose answer resumes the agent."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Run, RunStatus
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.agent_turns import agent_data, text
from tests.support.generate_e2e import GRAPHQL_PATH, finished_run, joined_content, server_env

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

AGENTS = {
    "counter": {"kind": "python", "class": "agents.examples.CounterAgent"},
    "approver": {"kind": "python", "class": "tests.support.python_agents.ApprovalAgent"},
}


@pytest.fixture
def server(shared_live_server_factory: Any, fake_upstream: FakeUpstream) -> ServedProcess:
    return shared_live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_AGENTS=json.dumps(AGENTS))
    )


@pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)
def test_a_python_agents_state_streams_and_loads_back(server: ServedProcess, version: str) -> None:
    thread_id = str(uuid.uuid4())
    outcome = run_js(
        version,
        {
            "op": "sequence",
            "url": server.url + GRAPHQL_PATH,
            "commands": [
                {
                    "op": "generate",
                    "data": agent_data("counter", [text("u1", "hi")], thread_id=thread_id),
                },
                {"op": "generate", "followUp": {"userText": "again"}},
                {"op": "loadAgentState", "threadId": thread_id, "agentName": "counter"},
            ],
        },
    )
    first, second, loaded = outcome["results"]

    for turn, count in ((first, 1), (second, 2)):
        assert turn["errors"] == []
        (state,) = [
            m for m in turn["final"]["messages"] if m["__typename"] == "AgentStateMessageOutput"
        ]
        assert (state["agentName"], state["threadId"], json.loads(state["state"])) == (
            "counter",
            thread_id,
            {"count": count},
        )
        (reply,) = [m for m in turn["final"]["messages"] if m["__typename"] == "TextMessageOutput"]
        assert joined_content(reply).startswith(f"This is turn {count} of this thread.")
    assert loaded["errors"] == []
    assert loaded["state"] == {"count": 2}
    assert [m["content"] for m in loaded["messages"]] == [
        "hi",
        "This is turn 1 of this thread. Say 'reset' to start over.",
        "again",
        "This is turn 2 of this thread. Say 'reset' to start over.",
    ]


@pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)
def test_a_copilotkit_interrupt_reaches_the_client_and_its_answer_resumes(
    server: ServedProcess, version: str
) -> None:
    thread_id = str(uuid.uuid4())
    value = json.dumps({"question": "Ship the order?"}, separators=(",", ":"))
    outcome = run_js(
        version,
        {
            "op": "sequence",
            "url": server.url + GRAPHQL_PATH,
            "commands": [
                {
                    "op": "generate",
                    "data": agent_data("approver", [text("u1", "ship it")], thread_id=thread_id),
                },
                {
                    "op": "generate",
                    "followUp": {},
                    "data": {
                        "metaEvents": [
                            {
                                "name": "CopilotKitLangGraphInterruptEvent",
                                "value": value,
                                "response": "approved",
                            }
                        ]
                    },
                },
                {"op": "loadAgentState", "threadId": thread_id, "agentName": "approver"},
            ],
        },
    )
    paused, resumed, loaded = outcome["results"]

    assert paused["errors"] == []
    assert paused["final"]["status"]["code"] == "Success"
    (meta,) = paused["final"]["metaEvents"]
    assert (meta["__typename"], meta["type"], meta["name"]) == (
        "CopilotKitLangGraphInterruptEvent",
        "MetaEvent",
        "CopilotKitLangGraphInterruptEvent",
    )
    assert json.loads(meta["data"]["value"]) == {"question": "Ship the order?"}
    text_message, call_message = meta["data"]["messages"]
    assert (text_message["__typename"], text_message["content"], text_message["role"]) == (
        "TextMessageOutput",
        ["Order #42, 3 items."],
        "assistant",
    )
    assert text_message["status"]["code"] == "Success"
    assert (call_message["__typename"], call_message["name"]) == (
        "ActionExecutionMessageOutput",
        "showOrder",
    )
    assert json.loads("".join(call_message["arguments"])) == {"order": 42}

    assert resumed["errors"] == []
    (reply,) = [m for m in resumed["final"]["messages"] if m["__typename"] == "TextMessageOutput"]
    assert joined_content(reply) == "Decision recorded: approved."
    assert loaded["state"] == {"decision": "approved"}
    runs = Run.objects.filter(thread__thread_id=thread_id).order_by("created_at")
    assert [finished_run(run.pk).status for run in runs] == [
        RunStatus.INTERRUPTED,
        RunStatus.SUCCEEDED,
    ]
