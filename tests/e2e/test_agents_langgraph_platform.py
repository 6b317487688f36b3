"""A LangGraph Platform agent (kind ``langgraph``) through the real CopilotKit clients: the
forecast graph served by a real local LangGraph server (``langgraph dev``, langgraph-api in
memory, its model the fake upstream), run through the ``langgraph-sdk`` client by the served
runtime. Text and the graph's own tool call stream to the client, the graph's state is
persisted and loaded back, its ``interrupt()`` reaches the client and the client's answer
resumes the graph (``Command(resume=...)``); a reload restores the conversation. The real v1
client (both builds) and the real v2 core."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from agents.langgraph_platform.config import Deployment
from agents.langgraph_platform.runner import langgraph_thread_id
from conversations.models import Run, RunStatus, Thread, ThreadStatus
from tests.e2e.agui_client import run_agui, sse_frames
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.agent_turns import agent_data, text
from tests.support.generate_e2e import GRAPHQL_PATH, finished_run, joined_content, server_env
from tests.support.langgraph_agent_app import APPROVAL_QUESTION

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.support.langgraph_platform.server import LangGraphServer

pytestmark = pytest.mark.e2e

FORECAST = "It is sunny in Paris."


def _by_type(messages: list[dict[str, Any]], typename: str) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("__typename") == typename]


@pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)
def test_a_langgraph_platform_agent_streams_persists_state_and_resumes_after_an_interrupt(
    live_server_factory: Any,
    fake_upstream: FakeUpstream,
    langgraph_server: LangGraphServer,
    version: str,
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": FORECAST},
        {"text": "Thanks, published."},
    )
    agents = {"forecaster": {"kind": "langgraph", "url": langgraph_server.url}}
    server = live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_AGENTS=json.dumps(agents))
    )
    thread_id = str(uuid.uuid4())
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
    # The LangGraph thread is derived from ours and recorded on it: a reload, another process
    # or a worker continue the same LangGraph thread.
    recorded = Thread.objects.get(thread_id=thread_id).metadata["langgraph:forecaster"]
    assert recorded["url"] == langgraph_server.url
    assert recorded["thread_id"] == langgraph_thread_id(
        thread_id=thread_id,
        agent_name="forecaster",
        deployment=Deployment(url=langgraph_server.url),
    )


def test_the_v2_core_runs_answers_the_interrupt_and_reloads_the_conversation(
    live_server_factory: Any, fake_upstream: FakeUpstream, langgraph_server: LangGraphServer
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": FORECAST},
        {"text": "Thanks, published."},
    )
    agents = {"forecaster": {"kind": "langgraph", "url": langgraph_server.url}}
    server = live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_AGENTS=json.dumps(agents))
    )
    thread_id = str(uuid.uuid4())
    base = {
        "runtimeUrl": f"{server.url}/api/copilotkit",
        "agentId": "forecaster",
        "threadId": thread_id,
    }

    result = run_agui(
        {
            **base,
            "steps": [
                {"op": "run", "message": {"id": "u1", "content": "Weather in Paris?"}},
                # The answer, as AG-UI's resume (the core sends it with the next run).
                {"op": "run", "resume": [{"payload": "yes"}]},
            ],
        },
        timeout=120,
    )

    assert result["errors"] == []
    first, resumed = result["steps"]
    kinds = [e["type"] for e in first["events"]]
    assert "TOOL_CALL_START" in kinds and "TOOL_CALL_RESULT" in kinds
    [call] = [e for e in first["events"] if e["type"] == "TOOL_CALL_START"]
    assert call["toolCallName"] == "get_weather"
    interrupts = [e for e in first["events"] if e["type"] == "CUSTOM"]
    assert [json.loads(e["value"]) for e in interrupts] == [
        {**APPROVAL_QUESTION, "forecast": FORECAST}
    ]
    assert kinds[-1] == "RUN_FINISHED"
    assert "error" not in resumed, resumed
    # The second run carried the answer as AG-UI's resume and finished the graph.
    runs_sent = [e for e in result["http"] if e["url"].endswith("/agent/forecaster/run")]
    assert runs_sent[1]["requestBody"]["resume"] == [{"payload": "yes"}]
    assert (
        runs_sent[1]["responseText"]
        .rstrip()
        .endswith('"runId":"' + runs_sent[1]["requestBody"]["runId"] + '"}')
    )
    assert '"type":"RUN_FINISHED"' in runs_sent[1]["responseText"]
    second_events = sse_frames(runs_sent[1]["responseText"])
    snapshots = [e["snapshot"] for e in second_events if e["type"] == "STATE_SNAPSHOT"]
    assert snapshots[-1] == {"forecast": FORECAST, "approved": "yes"}
    deltas = [e["delta"] for e in second_events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(deltas) == "Thanks, published."

    # A reload: a new client on the same thread gets the conversation back from the runtime.
    reloaded = run_agui({**base, "steps": [{"op": "connect"}]}, timeout=60)
    assert reloaded["errors"] == []
    assert [
        m["content"]
        for m in reloaded["messages"]
        if m["role"] in ("user", "assistant") and m.get("content")
    ] == ["Weather in Paris?", FORECAST, "Thanks, published."]
    assert reloaded["state"] == {"forecast": FORECAST, "approved": "yes"}
    runs = list(Run.objects.filter(thread__thread_id=thread_id).order_by("created_at"))
    assert [finished_run(run.pk).status for run in runs] == [
        RunStatus.INTERRUPTED,
        RunStatus.SUCCEEDED,
    ]
