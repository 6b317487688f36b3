"""The built-in agent's shared state tools through the real clients: a v2 client's model edits
the app's state with AGUISendStateDelta / AGUISendStateSnapshot (the TypeScript runtime 1.75's
built-in agent's tools), and a v1 client's model is offered neither (TS 1.10.6)."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import AgentState
from tests.e2e.agui_client import run_agui
from tests.e2e.js_client import run_js
from tests.support.generate_e2e import generate_command, generate_data, server_env, text_input

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

STATE_TOOLS = ["AGUISendStateSnapshot", "AGUISendStateDelta"]


@pytest.fixture
def server(shared_live_server_factory: Any, fake_upstream: FakeUpstream) -> ServedProcess:
    return shared_live_server_factory(env=server_env(fake_upstream.base_url))


def _calling(name: str, arguments: dict[str, Any], message_id: str) -> dict[str, Any]:
    directive = {"tool_calls": [{"name": name, "arguments": arguments}]}
    content = "Update the state.\nFAKE: " + json.dumps(directive)
    return {"op": "run", "message": {"id": message_id, "content": content}}


def _kinds(step: dict[str, Any]) -> list[str]:
    skipped = ("RUN_STARTED", "RUN_FINISHED", "TOOL_CALL_ARGS")
    return [event["type"] for event in step["events"] if event["type"] not in skipped]


def test_the_model_edits_the_clients_state_with_deltas_and_snapshots(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    thread_id = f"state-tools-{uuid.uuid4()}"
    delta = [
        {"op": "add", "path": "/todos/-", "value": {"title": "milk"}},
        {"op": "add", "path": "/owner", "value": "Ann"},
    ]
    snapshot = {"todos": [], "owner": "Bob"}
    result = run_agui(
        {
            "runtimeUrl": f"{server.url}/api/copilotkit",
            "agentId": "default",
            "threadId": thread_id,
            "steps": [
                _calling("AGUISendStateDelta", {"delta": delta}, "u1"),
                _calling("AGUISendStateSnapshot", {"snapshot": snapshot}, "u2"),
                {"op": "connect"},
            ],
        }
    )

    assert result["errors"] == []
    first, second, replayed = result["steps"]
    # TS's order: the call, the state the run's first patch starts from and the patch, the
    # call's result; no further model step.
    assert _kinds(first) == [
        "TOOL_CALL_START",
        "TOOL_CALL_END",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "TOOL_CALL_RESULT",
    ]
    [sent_delta] = [e for e in first["events"] if e["type"] == "STATE_DELTA"]
    assert sent_delta["delta"] == [{"op": "add", "path": "/todos", "value": []}, *delta]
    [first_result] = [e for e in first["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert json.loads(first_result["content"]) == {"success": True, "delta": delta}
    assert _kinds(second)[-2:] == ["STATE_SNAPSHOT", "TOOL_CALL_RESULT"]
    [second_result] = [e for e in second["events"] if e["type"] == "TOOL_CALL_RESULT"]
    assert json.loads(second_result["content"]) == {"success": True, "snapshot": snapshot}

    # The first run's model saw no state (the client's is {}); the second saw the delta's work.
    first_request, second_request = fake_upstream.requests()
    for body in (first_request, second_request):
        # After the test server's own server actions, as TS merges them.
        assert [tool["function"]["name"] for tool in body["tools"]][-2:] == STATE_TOOLS
        assert body["tool_choice"] == "auto"
    assert first_request["messages"][0]["role"] == "user"
    shown = second_request["messages"][0]
    assert shown["role"] == "system"
    assert shown["content"].startswith("\n## Application State\n")
    assert '"owner": "Ann"' in shown["content"]

    # The latest stored state (one row per run that changed it), what the next run starts from.
    stored = AgentState.objects.filter(thread__thread_id=thread_id, agent_name="default").first()
    assert stored is not None and stored.state == snapshot
    assert result["state"] == snapshot
    replayed_states = [e for e in replayed["events"] if e["type"] == "STATE_SNAPSHOT"]
    assert replayed_states and replayed_states[-1]["snapshot"] == snapshot


def test_a_v1_turn_offers_the_model_no_state_tools(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    data = generate_data(
        thread_id=f"state-tools-v1-{uuid.uuid4()}", messages=[text_input("u1", "Hello")]
    )
    result = run_js("1.10.6", generate_command(server.url, data))

    assert result["final"]["status"]["code"] == "Success"
    (body,) = fake_upstream.requests()
    # The test server's own server actions only, with no tool choice (TS 1.10.6 sends none).
    assert [tool["function"]["name"] for tool in body["tools"]] == ["serverAdd", "always_fails"]
    assert "tool_choice" not in body
    assert all("Application State" not in str(m["content"]) for m in body["messages"])
