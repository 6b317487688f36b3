"""A real CopilotKit remote endpoint (PyPI ``copilotkit`` 0.1.96 under uvicorn on loopback)
behind the served runtime, driven by the real CopilotKit GraphQL client: its actions are
discovered and executed for the chat engine (a failing one answers its error), and its agent
streams, pauses on an interrupt and resumes with the client's answer."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.agent_turns import agent_data, text
from tests.support.copilotkit_sdk_app import ENDPOINT_PREFIX, REMOTE_FAILURE
from tests.support.generate_e2e import (
    GRAPHQL_PATH,
    generate_command,
    generate_data,
    joined_content,
    server_env,
    text_input,
)
from tests.support.peer_servers import UvicornServer

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = pytest.mark.e2e

versions = pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)


@pytest.fixture
def server(
    live_server_factory: Any, fake_upstream: FakeUpstream, sdk_server: UvicornServer
) -> ServedProcess:
    endpoints = [{"name": "python-sdk", "url": sdk_server.url + ENDPOINT_PREFIX}]
    agents = {"scripted": {"kind": "remote", "endpoint": "python-sdk"}}
    return live_server_factory(
        env=server_env(
            fake_upstream.base_url,
            COPILOT_RUNTIME_REMOTE_ENDPOINTS=json.dumps(endpoints),
            COPILOT_RUNTIME_AGENTS=json.dumps(agents),
        )
    )


def _messages(result: dict[str, Any], typename: str) -> list[dict[str, Any]]:
    return [m for m in result["final"]["messages"] if m["__typename"] == typename]


@versions
def test_remote_actions_run_for_the_chat_engine(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script(
        {
            "tool_calls": [
                {"name": "remoteGreet", "arguments": {"name": "Ann"}, "id": "call-greet"},
                {"name": "remoteFail", "arguments": {}, "id": "call-fail"},
            ]
        },
        {"text": "Done."},
    )

    result = run_js(
        version,
        generate_command(
            server.url, generate_data(thread_id=None, messages=[text_input("u1", "go")])
        ),
    )

    assert result["errors"] == []
    assert result["final"]["status"]["code"] == "Success"
    offered = {tool["function"]["name"] for tool in fake_upstream.requests()[0]["tools"]}
    assert {"remoteGreet", "remoteFail"} <= offered
    results = {m["actionName"]: m["result"] for m in _messages(result, "ResultMessageOutput")}
    assert json.loads(results["remoteGreet"]) == {"greeting": "Hello, Ann!"}
    failure = json.loads(results["remoteFail"])["error"]
    assert failure["code"] == "HANDLER_ERROR"
    assert REMOTE_FAILURE in failure["message"] and "python-sdk" in failure["message"]
    (reply,) = _messages(result, "TextMessageOutput")
    assert joined_content(reply) == "Done."


@versions
def test_a_remote_agent_pauses_and_resumes_through_the_client(
    server: ServedProcess, version: str
) -> None:
    thread_id = str(uuid.uuid4())
    value = json.dumps({"question": "Proceed?"})
    outcome = run_js(
        version,
        {
            "op": "sequence",
            "url": server.url + GRAPHQL_PATH,
            "commands": [
                {
                    "op": "generate",
                    "data": agent_data(
                        "scripted", [text("u1", "please interrupt")], thread_id=thread_id
                    ),
                },
                {
                    "op": "generate",
                    "followUp": {},
                    "data": {
                        "metaEvents": [
                            {"name": "LangGraphInterruptEvent", "value": value, "response": "go on"}
                        ]
                    },
                },
                {"op": "loadAgentState", "threadId": thread_id, "agentName": "scripted"},
            ],
        },
    )
    paused, resumed, loaded = outcome["results"]

    assert paused["errors"] == []
    (meta,) = paused["final"]["metaEvents"]
    assert (meta["name"], json.loads(meta["value"])) == (
        "LangGraphInterruptEvent",
        {"question": "Proceed?"},
    )
    (state,) = _messages(paused, "AgentStateMessageOutput")
    assert (state["agentName"], state["threadId"], json.loads(state["state"])) == (
        "scripted",
        thread_id,
        {"turns": 1},
    )
    (reply,) = _messages(resumed, "TextMessageOutput")
    assert joined_content(reply) == "You answered: go on"
    assert loaded["state"] == {"turns": 2, "answer": "go on"}
