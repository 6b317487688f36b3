"""Agents a remote endpoint announces are listed and run without being declared (as the
TypeScript runtime 1.10.6 lists them): the real CopilotKit remote endpoint (PyPI
``copilotkit``) announces its agent, the real v1 client lists it in ``availableAgents``, the
real v2 core finds it in ``/info`` and runs it; an unreachable endpoint only costs its agents
and a warning."""

from __future__ import annotations

import json
import socket
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Run, RunStatus
from tests.e2e.agui_client import run_agui
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.copilotkit_sdk_app import ENDPOINT_PREFIX
from tests.support.generate_e2e import server_env
from tests.support.peer_servers import UvicornServer

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = pytest.mark.e2e


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def server(
    live_server_factory: Any, fake_upstream: FakeUpstream, sdk_server: UvicornServer
) -> ServedProcess:
    endpoints = [
        {"name": "python-sdk", "url": sdk_server.url + ENDPOINT_PREFIX},
        # Nobody listens here: its agents are missing from the lists, nothing else is. (Its
        # actions are not offered: an endpoint whose actions a turn needs fails that turn.)
        {
            "name": "gone",
            "url": f"http://127.0.0.1:{closed_port()}/copilotkit",
            "offer_actions": False,
        },
    ]
    agents = {"helper": {"kind": "llm", "instructions": "Help.", "description": "Declared"}}
    return live_server_factory(
        env=server_env(
            fake_upstream.base_url,
            COPILOT_RUNTIME_REMOTE_ENDPOINTS=json.dumps(endpoints),
            COPILOT_RUNTIME_AGENTS=json.dumps(agents),
            COPILOT_RUNTIME_REMOTE_RETRIES="0",
        )
    )


@pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)
def test_the_v1_client_lists_the_announced_agent_beside_the_declared_ones(
    server: ServedProcess, version: str
) -> None:
    result = run_js(version, {"op": "availableAgents", "url": server.url + "/api/copilotkit"})

    agents = {agent["name"]: agent for agent in result["data"]["availableAgents"]["agents"]}
    assert set(agents) == {"default", "helper", "scripted"}
    assert agents["scripted"]["description"] == "Echoes, asks, remembers"
    assert agents["helper"]["description"] == "Declared"
    # The unreachable endpoint is in the log, not in the answer.
    assert "could not list its agents" in server.stdout_text() + server.stderr_text()


def test_the_v2_core_finds_the_announced_agent_and_runs_it(server: ServedProcess) -> None:
    thread_id = f"announced-{uuid.uuid4()}"
    result = run_agui(
        {
            "runtimeUrl": f"{server.url}/api/copilotkit",
            "agentId": "scripted",
            "threadId": thread_id,
            "steps": [{"op": "run", "message": {"id": "u1", "content": "Hello remote"}}],
        }
    )

    assert result["errors"] == []
    assert {"default", "helper", "scripted"} <= set(result["agents"])
    assert [m["content"] for m in result["messages"] if m["role"] == "assistant"] == [
        "Echo: Hello remote"
    ]
    run = Run.objects.get(thread__thread_id=thread_id)
    assert run.status == RunStatus.SUCCEEDED and run.agent_name == "scripted"
