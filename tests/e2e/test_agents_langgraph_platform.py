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
from conversations.models import Run, RunStatus, Thread
from tests.e2e.agui_client import run_agui, sse_frames
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.forecast_conversation import (
    FORECAST,
    assert_forecast_conversation,
    forecast_sequence,
    script_forecast,
)
from tests.support.generate_e2e import finished_run, server_env
from tests.support.langgraph_agent_app import APPROVAL_QUESTION

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.support.langgraph_platform.server import LangGraphServer

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)
def test_a_langgraph_platform_agent_streams_persists_state_and_resumes_after_an_interrupt(
    live_server_factory: Any,
    fake_upstream: FakeUpstream,
    langgraph_server: LangGraphServer,
    version: str,
) -> None:
    script_forecast(fake_upstream)
    agents = {"forecaster": {"kind": "langgraph", "url": langgraph_server.url}}
    server = live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_AGENTS=json.dumps(agents))
    )
    thread_id = str(uuid.uuid4())

    outcome = run_js(
        version, forecast_sequence(server_url=server.url, thread_id=thread_id), timeout=120
    )

    assert_forecast_conversation(
        outcome["results"], thread_id=thread_id, fake_upstream=fake_upstream
    )
    # The LangGraph thread is derived from ours and recorded on it: a reload, another process
    # or a worker continue the same LangGraph thread.
    thread = Thread.objects.get(thread_id=thread_id)
    recorded = thread.metadata["langgraph:forecaster"]
    assert recorded["url"] == langgraph_server.url
    assert recorded["thread_id"] == langgraph_thread_id(
        thread_id=thread_id,
        thread_pk=thread.pk,
        agent_name="forecaster",
        deployment=Deployment(url=langgraph_server.url),
    )


# AG-UI's resume entry: it names its interrupt and status (RUN_STARTED echoes it, and
# @ag-ui/core's schema requires both); the engine answers the thread's persisted interrupt,
# whatever id the entry names.
ANSWER = {"interruptId": "weather", "status": "resolved", "payload": "yes"}


def test_the_v2_core_runs_answers_the_interrupt_and_reloads_the_conversation(
    live_server_factory: Any, fake_upstream: FakeUpstream, langgraph_server: LangGraphServer
) -> None:
    script_forecast(fake_upstream)
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
                {"op": "run", "resume": [ANSWER]},
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
    assert runs_sent[1]["requestBody"]["resume"] == [ANSWER]
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
