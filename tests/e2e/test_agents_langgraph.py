"""A real AG-UI agent through the real CopilotKit GraphQL client: a LangGraph graph served by
``ag-ui-langgraph`` on loopback (its model the fake upstream through ``langchain-openai``),
configured as an ``agui`` agent of the served runtime (daphne).

Text streams to the client, the graph's state is persisted and loaded back with
``loadAgentState``, its ``interrupt()`` reaches the client in ``metaEvents`` (the run and the
thread end ``interrupted``), and the client's answer in the next request resumes the graph.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Run, RunStatus, Thread, ThreadStatus
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.agent_turns import agent_data, text
from tests.support.generate_e2e import GRAPHQL_PATH, finished_run, joined_content, server_env
from tests.support.langgraph_agent_app import AGENT_PATH, APPROVAL_QUESTION, langgraph_app
from tests.support.peer_servers import UvicornServer

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

FORECAST = "It is sunny in Paris."


@pytest.fixture
def graph_server(fake_upstream: FakeUpstream) -> Iterator[UvicornServer]:
    with UvicornServer(langgraph_app(fake_upstream.base_url)) as server:
        yield server


def _by_type(messages: list[dict[str, Any]], typename: str) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("__typename") == typename]


@pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)
def test_a_langgraph_agent_streams_persists_state_and_resumes_after_an_interrupt(
    live_server_factory: Any,
    fake_upstream: FakeUpstream,
    graph_server: UvicornServer,
    version: str,
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": FORECAST},
        {"text": "Thanks, published."},
    )
    agents = {"forecaster": {"kind": "agui", "url": graph_server.url + AGENT_PATH}}
    server = live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_AGENTS=json.dumps(agents))
    )
    thread_id = str(uuid.uuid4())
    # ag-ui-langgraph sends the interrupt's value as json.dumps of what the graph passed.
    interrupt_value = json.dumps({**APPROVAL_QUESTION, "forecast": FORECAST})
    load = {"op": "loadAgentState", "threadId": thread_id, "agentName": "forecaster"}

    outcome = run_js(
        version,
        {
            "op": "sequence",
            "url": server.url + GRAPHQL_PATH,
            "commands": [
                {
                    "op": "generate",
                    "data": agent_data(
                        "forecaster", [text("u1", "Weather in Paris?")], thread_id=thread_id
                    ),
                },
                load,
                {
                    "op": "generate",
                    "followUp": {},
                    "data": {
                        "metaEvents": [
                            {
                                "name": "LangGraphInterruptEvent",
                                "value": interrupt_value,
                                "response": "yes",
                            }
                        ]
                    },
                },
                load,
            ],
        },
        timeout=120,
    )
    first, loaded_paused, resumed, loaded_done = outcome["results"]

    # The first turn: the tool call, its result and the text streamed; the interrupt arrived.
    assert first["errors"] == []
    final = first["final"]
    assert final["status"]["code"] == "Success"
    (call,) = _by_type(final["messages"], "ActionExecutionMessageOutput")
    assert call["name"] == "get_weather"
    assert json.loads(joined_content(call)) == {"city": "Paris"}
    (result,) = _by_type(final["messages"], "ResultMessageOutput")
    assert result["result"] == "Sunny in Paris, 21 degrees"
    texts = [joined_content(m) for m in _by_type(final["messages"], "TextMessageOutput")]
    assert texts == [FORECAST]
    states = _by_type(final["messages"], "AgentStateMessageOutput")
    assert states and {s["agentName"] for s in states} == {"forecaster"}
    assert {s["threadId"] for s in states} == {thread_id}
    (meta,) = final["metaEvents"]
    assert (meta["__typename"], meta["name"], meta["type"]) == (
        "LangGraphInterruptEvent",
        "LangGraphInterruptEvent",
        "MetaEvent",
    )
    assert json.loads(meta["value"]) == {**APPROVAL_QUESTION, "forecast": FORECAST}

    # Paused: the run ended interrupted (the sequence answered it since); the state so far
    # loaded back.
    paused_run = Run.objects.filter(thread__thread_id=thread_id).order_by("created_at").first()
    assert finished_run(paused_run.pk).status == RunStatus.INTERRUPTED
    assert loaded_paused["errors"] == []
    assert loaded_paused["state"] == {}  # the graph had not written its own keys yet
    assert [m.get("content") for m in loaded_paused["messages"] if "content" in m] == [
        "Weather in Paris?",
        FORECAST,
    ]

    # The answer resumed the graph: its last node ran and the state holds the answer.
    assert resumed["errors"] == []
    assert resumed["final"]["status"]["code"] == "Success"
    resumed_texts = [
        joined_content(m) for m in _by_type(resumed["final"]["messages"], "TextMessageOutput")
    ]
    assert resumed_texts == ["Thanks, published."]
    assert resumed["final"]["metaEvents"] == []
    assert loaded_done["state"] == {"forecast": FORECAST, "approved": "yes"}
    assert [m.get("content") for m in loaded_done["messages"] if "content" in m] == [
        "Weather in Paris?",
        FORECAST,
        "Thanks, published.",
    ]
    runs = list(Run.objects.filter(thread__thread_id=thread_id).order_by("created_at"))
    assert [finished_run(run.pk).status for run in runs] == [
        RunStatus.INTERRUPTED,
        RunStatus.SUCCEEDED,
    ]
    assert Thread.objects.get(thread_id=thread_id).status == ThreadStatus.IDLE
    # The graph's three model calls went to the fake upstream; the runtime made none itself.
    assert len(fake_upstream.requests()) == 3
