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

from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.forecast_conversation import (
    assert_forecast_conversation,
    forecast_sequence,
    script_forecast,
)
from tests.support.generate_e2e import server_env
from tests.support.langgraph_agent_app import AGENT_PATH, langgraph_app
from tests.support.peer_servers import UvicornServer

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e


@pytest.fixture
def graph_server(fake_upstream: FakeUpstream) -> Iterator[UvicornServer]:
    with UvicornServer(langgraph_app(fake_upstream.base_url)) as server:
        yield server


@pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)
def test_a_langgraph_agent_streams_persists_state_and_resumes_after_an_interrupt(
    live_server_factory: Any,
    fake_upstream: FakeUpstream,
    graph_server: UvicornServer,
    version: str,
) -> None:
    script_forecast(fake_upstream)
    agents = {"forecaster": {"kind": "agui", "url": graph_server.url + AGENT_PATH}}
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
