"""LangGraph Platform agents against a real local LangGraph server (``langgraph dev``):
discovery of a deployment's assistants, the stream mapping, and failures of the deployment."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from django.test import AsyncClient, override_settings

from agents.langgraph_platform.events import LangGraphRunMapper
from agents.langgraph_platform.messages import langgraph_messages
from conversations.models import RunStatus
from copilot_runtime.events import ActionResult, AgentStateSnapshot, MetaEvent
from copilot_runtime.events.request import InputMessage
from tests.copilot_runtime.agui.helpers import BASE, body_of, post, read_events, run_body, user
from tests.support.agent_turns import run_ended

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("_close_run_thread_connections"),
]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def info_agents() -> dict[str, Any]:
    response = await AsyncClient().get(BASE + "/info")
    assert response.status_code == 200
    return body_of(response)["agents"]


async def test_a_deployment_without_listed_agents_offers_every_assistant(
    langgraph_server: Any,
) -> None:
    deployments = [{"url": langgraph_server.url}]
    with override_settings(COPILOT_RUNTIME={"LANGGRAPH_DEPLOYMENTS": deployments}):
        agents = await info_agents()
    assert set(agents) == {"default", "forecaster"}
    assert agents["forecaster"]["className"] == "HttpAgent"


async def test_listed_agents_are_offered_under_their_own_names(langgraph_server: Any) -> None:
    deployments = [
        {
            "url": langgraph_server.url,
            "agents": [{"name": "weather", "assistant": "forecaster", "description": "Forecasts"}],
        }
    ]
    with override_settings(COPILOT_RUNTIME={"LANGGRAPH_DEPLOYMENTS": deployments}):
        agents = await info_agents()
    assert set(agents) == {"default", "weather"}
    assert agents["weather"]["description"] == "Forecasts"


async def test_an_unreachable_deployment_costs_only_its_agents(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conf = {
        "LANGGRAPH_DEPLOYMENTS": [{"url": f"http://127.0.0.1:{closed_port()}"}],
        "AGENTS": {"helper": {"kind": "llm", "instructions": "Help."}},
    }
    with override_settings(COPILOT_RUNTIME=conf):
        agents = await info_agents()
    assert set(agents) == {"default", "helper"}
    assert "could not list its agents" in caplog.text


async def test_a_run_on_a_deployment_that_is_down_fails_naming_it(fake_upstream: Any) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    agents = {"forecaster": {"kind": "langgraph", "url": url}}
    with override_settings(COPILOT_RUNTIME={"AGENTS": agents}):
        body = run_body("lg-down", [user("u1", "Hi")])
        events = await read_events(await post(AsyncClient(), "/agent/forecaster/run", body))
    error = events[-1]
    assert error["type"] == "RUN_ERROR"
    assert error["code"] == "AGENT_ENDPOINT_UNREACHABLE"
    assert url in error["message"] and "forecaster" in error["message"]
    run = await run_ended(body["runId"])
    assert run.status == RunStatus.FAILED


# --- the pieces -------------------------------------------------------------------------------


def test_stored_messages_become_langgraph_messages_with_their_ids() -> None:
    converted = langgraph_messages(
        [
            InputMessage(id="s", kind="text", role="system", content="Rules"),
            InputMessage(id="u1", kind="text", role="user", content="Weather?"),
            InputMessage(id="a1", kind="text", role="assistant", content="Looking"),
            InputMessage(
                id="c1",
                kind="action_execution",
                role="assistant",
                action_name="get_weather",
                arguments={"city": "Paris"},
                parent_message_id="a1",
            ),
            InputMessage(
                id="r1", kind="result", role="tool", action_execution_id="c1", result="Sunny"
            ),
        ]
    )
    assert converted == [
        {"type": "system", "content": "Rules", "id": "s"},
        {"type": "human", "content": "Weather?", "id": "u1"},
        {
            "type": "ai",
            "content": "Looking",
            "id": "a1",
            "tool_calls": [
                {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}, "type": "tool_call"}
            ],
        },
        {"type": "tool", "content": "Sunny", "tool_call_id": "c1", "name": "", "id": "r1"},
    ]


def test_interrupts_tool_results_and_state_changes_are_mapped() -> None:
    mapper = LangGraphRunMapper(thread_id="t", agent_name="a", state={"stage": 1})
    first = mapper.feed("values", {"messages": [], "stage": 1})
    same = mapper.feed("values", {"messages": [{"type": "human"}], "stage": 1})
    changed = mapper.feed("values", {"messages": [], "stage": 2, "__interrupt__": [{"x": 1}]})
    results = mapper.feed(
        "updates",
        {
            "tools": {
                "messages": [{"type": "tool", "tool_call_id": "c1", "name": "f", "content": 3}]
            }
        },
    )
    paused = mapper.feed("updates", {"__interrupt__": [{"value": {"q": "Go?"}, "id": "i1"}]})

    assert [e.state for e in first if isinstance(e, AgentStateSnapshot)] == [{"stage": 1}]
    assert same == []
    assert [e.state for e in changed if isinstance(e, AgentStateSnapshot)] == [{"stage": 2}]
    assert results == [ActionResult(action_execution_id="c1", action_name="f", result="3")]
    [meta] = paused
    assert isinstance(meta, MetaEvent) and meta.name == "LangGraphInterruptEvent"
    assert meta.value == '{"q":"Go?"}' and meta.data == {"interruptIds": ["i1"]}
    assert mapper.interrupted


async def test_each_owners_thread_of_one_id_continues_a_langgraph_thread_of_its_own(
    user: Any,
) -> None:
    """Derived from our thread (id and primary key): two owners' threads of one client id
    never share a LangGraph thread. A thread recorded before ids were per owner keeps the
    LangGraph thread it recorded."""
    from agents.langgraph_platform.config import Deployment
    from agents.langgraph_platform.runner import _langgraph_thread, langgraph_thread_id
    from agents.runners.context import TurnContext
    from conversations.models import Thread
    from copilot_runtime.events.request import TurnRequest

    deployment = Deployment(url="http://127.0.0.1:9")
    mine = await Thread.objects.acreate(thread_id="lg-shared", owner=user)
    theirs = await Thread.objects.acreate(thread_id="lg-shared")
    recorded = {"thread_id": "recorded-before", "url": deployment.url}
    older = await Thread.objects.acreate(
        thread_id="lg-older", metadata={"langgraph:forecaster": recorded}
    )

    async def langgraph_thread(thread: Thread | None) -> str:
        request = TurnRequest(thread_id="lg-shared", messages=[])
        request.thread_pk = thread.pk if thread is not None else None
        turn = TurnContext(request=request, adapter=None)  # type: ignore[arg-type]
        return await _langgraph_thread(turn, "forecaster", deployment)

    first, second = await langgraph_thread(mine), await langgraph_thread(theirs)

    assert first != second
    assert first == await langgraph_thread(mine)  # found again, recorded on the thread
    assert first == langgraph_thread_id(
        thread_id="lg-shared", thread_pk=mine.pk, agent_name="forecaster", deployment=deployment
    )
    await mine.arefresh_from_db()
    assert mine.metadata["langgraph:forecaster"] == {"thread_id": first, "url": deployment.url}
    assert await langgraph_thread(older) == "recorded-before"
    # No stored thread (a suggestion): a LangGraph thread of its own each time.
    assert len({await langgraph_thread(None), await langgraph_thread(None), first}) == 3
