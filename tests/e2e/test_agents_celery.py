"""Agents on the Celery executor: the LangGraph graph (AG-UI) run by a real worker, relayed by
daphne to the real CopilotKit client, interrupt and resume included. The request's agent fields
travel to the worker with the stored request; the interrupt reaches the client from the
run's log."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import AgentState, Run, RunStatus
from conversations.selectors import TASK_HISTORY_KEY
from tests.e2e.celery.conftest import (  # noqa: F401 - fixtures used through request
    _module_redis_database,
    celery_env,
    celery_stack,
    celery_worker_factory,
    redis_url,
)
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.agent_turns import agent_data, text
from tests.support.generate_e2e import GRAPHQL_PATH, finished_run, joined_content, wait_for
from tests.support.langgraph_agent_app import AGENT_PATH, APPROVAL_QUESTION, langgraph_app
from tests.support.peer_servers import UvicornServer

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

CLIENT = JS_CLIENT_VERSIONS[0]
FORECAST = "It is sunny in Paris."


@pytest.fixture
def graph_server(fake_upstream: FakeUpstream) -> Iterator[UvicornServer]:
    with UvicornServer(langgraph_app(fake_upstream.base_url)) as server:
        yield server


def test_a_worker_runs_the_langgraph_agent_through_its_interrupt(
    transactional_db: None,
    request: pytest.FixtureRequest,
    fake_upstream: FakeUpstream,
    graph_server: UvicornServer,
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": FORECAST},
        {"text": "Thanks, published."},
    )
    agents = {"forecaster": {"kind": "agui", "url": graph_server.url + AGENT_PATH}}
    stack: Any = request.getfixturevalue("celery_stack")
    server, worker = stack(
        request.getfixturevalue("redis_url"), COPILOT_RUNTIME_AGENTS=json.dumps(agents)
    )
    thread_id = str(uuid.uuid4())
    value = json.dumps({**APPROVAL_QUESTION, "forecast": FORECAST})

    outcome = run_js(
        CLIENT,
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
                {
                    "op": "generate",
                    "followUp": {},
                    "data": {
                        "metaEvents": [
                            {"name": "LangGraphInterruptEvent", "value": value, "response": "yes"}
                        ]
                    },
                },
            ],
        },
        timeout=120,
    )
    paused, resumed = outcome["results"]

    assert paused["errors"] == [], (paused["errors"], server.stderr_text()[-3000:])
    assert resumed["errors"] == [], (resumed["errors"], server.stderr_text()[-3000:])
    (meta,) = paused["final"]["metaEvents"]
    assert json.loads(meta["value"])["forecast"] == FORECAST
    texts = [
        joined_content(m)
        for m in resumed["final"]["messages"]
        if m["__typename"] == "TextMessageOutput"
    ]
    assert texts == ["Thanks, published."]
    runs = list(Run.objects.filter(thread__thread_id=thread_id).order_by("created_at"))
    assert [finished_run(run.pk).status for run in runs] == [
        RunStatus.INTERRUPTED,
        RunStatus.SUCCEEDED,
    ]
    # Both ran on the worker, not in the web process (its log line for the second task may
    # follow the run's end by a moment).
    wait_for(lambda: len(worker.executed_runs()) == 2, timeout=5, what="the worker's task log")
    # What the runs keep of their requests: the answer, and what each task carried of the
    # thread's history (copilot_runtime/runs/task_history.py: the next task refers to it).
    payloads = [run.request_payload or {} for run in runs]
    assert all(TASK_HISTORY_KEY in payload for payload in payloads), payloads
    assert [
        {key: kept for key, kept in payload.items() if key != TASK_HISTORY_KEY}
        for payload in payloads
    ] == [
        {},
        {"meta_events": [{"name": "LangGraphInterruptEvent", "value": value, "response": "yes"}]},
    ]
    latest = AgentState.objects.filter(thread__thread_id=thread_id).latest("id")
    assert latest.state == {"forecast": FORECAST, "approved": "yes"}
