"""The forecast graph's conversation through the real v1 client, shared by the tests of the
two ways a LangGraph graph is served (``ag-ui-langgraph`` as an ``agui`` agent, and a LangGraph
server as a ``langgraph`` agent): a tool call, the forecast, an interrupt asking for approval,
the client's answer resuming the graph, and ``loadAgentState`` after each step."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from conversations.models import Run, RunStatus, Thread, ThreadStatus
from tests.support.agent_turns import agent_data, text
from tests.support.generate_e2e import GRAPHQL_PATH, finished_run, joined_content
from tests.support.langgraph_agent_app import APPROVAL_QUESTION

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

AGENT = "forecaster"
FORECAST = "It is sunny in Paris."


def script_forecast(fake_upstream: FakeUpstream) -> None:
    """The graph's three model calls: the tool call, the forecast, the closing text."""
    fake_upstream.script(
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": FORECAST},
        {"text": "Thanks, published."},
    )


def forecast_sequence(*, server_url: str, thread_id: str) -> dict[str, Any]:
    """The js client's commands: ask, load, answer the interrupt, load."""
    # The interrupt's value as both servers send it: JSON of what the graph passed.
    interrupt_value = json.dumps({**APPROVAL_QUESTION, "forecast": FORECAST})
    load = {"op": "loadAgentState", "threadId": thread_id, "agentName": AGENT}
    return {
        "op": "sequence",
        "url": server_url + GRAPHQL_PATH,
        "commands": [
            {
                "op": "generate",
                "data": agent_data(AGENT, [text("u1", "Weather in Paris?")], thread_id=thread_id),
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
    }


def by_type(messages: list[dict[str, Any]], typename: str) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("__typename") == typename]


def assert_forecast_conversation(
    results: list[dict[str, Any]], *, thread_id: str, fake_upstream: FakeUpstream
) -> None:
    first, loaded_paused, resumed, loaded_done = results

    # The first turn: the tool call, its result and the text streamed; the interrupt arrived.
    assert first["errors"] == []
    final = first["final"]
    assert final["status"]["code"] == "Success"
    (call,) = by_type(final["messages"], "ActionExecutionMessageOutput")
    assert call["name"] == "get_weather"
    assert json.loads(joined_content(call)) == {"city": "Paris"}
    (result,) = by_type(final["messages"], "ResultMessageOutput")
    assert result["result"] == "Sunny in Paris, 21 degrees"
    texts = [joined_content(m) for m in by_type(final["messages"], "TextMessageOutput")]
    assert texts == [FORECAST]
    states = by_type(final["messages"], "AgentStateMessageOutput")
    assert states and {s["agentName"] for s in states} == {AGENT}
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
    assert paused_run is not None
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
        joined_content(m) for m in by_type(resumed["final"]["messages"], "TextMessageOutput")
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
