"""AG-UI agents (HttpAgent-style): the RunAgentInput sent, the SSE events read back, against
a scripted loopback server and against a real LangGraph graph served by ``ag-ui-langgraph``
(its model the project's fake upstream through ``langchain-openai``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from conversations.models import AgentState, Message, RunStatus, Thread, ThreadStatus
from copilot_runtime.events import (
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    MetaEvent,
    RunError,
    TextStart,
)
from copilot_runtime.graphql.agent_state import agent_state_load
from tests.support.agent_turns import agent_request, run_turn, streamed_text, text
from tests.support.fixture_peer import FixturePeer, Reply
from tests.support.langgraph_agent_app import AGENT_PATH, langgraph_app
from tests.support.peer_servers import UvicornServer

pytestmark = pytest.mark.django_db(transaction=True)


def _settings(agent_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "EVENT_FLUSH_MS": 5,
        "ACTIONS": ["tests.support.actions.server_add"],
        "REMOTE_RETRY_BASE_SECONDS": 0.01,
        "REMOTE_RETRY_MAX_SECONDS": 0.02,
        "AGENTS": {
            "forecaster": {
                "kind": "agui",
                "url": agent_url,
                "headers": {"Authorization": "Bearer agent-token"},
                "forwarded_props": {"streamSubgraphs": False},
            }
        },
        **extra,
    }


# --- against a scripted server ------------------------------------------------------------------


@pytest.fixture
def scripted() -> Iterator[FixturePeer]:
    with (
        FixturePeer() as server,
        override_settings(COPILOT_RUNTIME=_settings(server.url + "/agent")),
    ):
        yield server


RUN = [
    {"type": "RUN_STARTED", "threadId": "agent-thread", "runId": "agui-run-1"},
    {"type": "STEP_STARTED", "stepName": "plan"},
    {"type": "TEXT_MESSAGE_START", "messageId": "a1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": "On"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a1", "delta": " it."},
    {"type": "TEXT_MESSAGE_END", "messageId": "a1"},
    {"type": "STATE_SNAPSHOT", "snapshot": {"stage": "planning", "messages": []}},
    {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/stage", "value": "done"}]},
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "c1",
        "toolCallName": "sayHello",
        "parentMessageId": "a1",
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"name": "Bob"}'},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    {"type": "CUSTOM", "name": "PredictState", "value": []},
    {"type": "RUN_FINISHED", "threadId": "agent-thread", "runId": "agui-run-1"},
]


async def test_the_run_agent_input_and_the_streamed_events(scripted: FixturePeer) -> None:
    scripted.reply("/agent", Reply.sse(RUN))
    history = [
        text("u1", "hello"),
        text("a0", "Calling a tool", role="assistant"),
        {
            "id": "call-0",
            "createdAt": "2025-01-01T00:00:00.000Z",
            "actionExecutionMessage": {
                "name": "lookup",
                "arguments": '{"q": 1}',
                "parentMessageId": "a0",
            },
        },
        {
            "id": "result-0",
            "createdAt": "2025-01-01T00:00:00.000Z",
            "resultMessage": {
                "actionExecutionId": "call-0",
                "actionName": "lookup",
                "result": "42",
            },
        },
        text("u2", "plan it"),
    ]

    events, run = await run_turn(
        agent_request(
            "forecaster",
            history,
            properties={"userId": "u-7"},
            agent_states=[{"agentName": "forecaster", "state": json.dumps({"stage": "new"})}],
        )
    )

    assert run.status == RunStatus.SUCCEEDED
    assert streamed_text(events) == "On it."
    states = [e.state for e in events if isinstance(e, AgentStateSnapshot)]
    assert states == [{"stage": "planning"}, {"stage": "done"}, {"stage": "done"}]
    stored = [s async for s in AgentState.objects.filter(agent_name="forecaster").order_by("id")]
    assert [(s.state, s.node_name, s.run_id, s.running) for s in stored] == [
        ({"stage": "planning"}, "plan", "agui-run-1", True),
        ({"stage": "done"}, "plan", "agui-run-1", True),
        ({"stage": "done"}, "plan", "agui-run-1", False),
    ]
    assert [e.action_name for e in events if isinstance(e, ActionStart)] == ["sayHello"]
    assert not [e for e in events if isinstance(e, MetaEvent) and "Interrupt" in e.name]

    (sent,) = scripted.requests
    assert sent.headers["accept"] == "text/event-stream"
    assert sent.headers["authorization"] == "Bearer agent-token"
    body = sent.body
    assert body["threadId"] == "agent-thread"
    assert body["runId"]
    assert body["state"] == {"stage": "new"}
    assert body["messages"] == [
        {"id": "u1", "role": "user", "content": "hello"},
        {
            "id": "a0",
            "role": "assistant",
            "content": "Calling a tool",
            "toolCalls": [
                {
                    "id": "call-0",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q":1}'},
                }
            ],
        },
        {"id": "result-0", "role": "tool", "content": "42", "toolCallId": "call-0"},
        {"id": "u2", "role": "user", "content": "plan it"},
    ]
    assert [tool["name"] for tool in body["tools"]] == ["serverAdd"]
    assert body["forwardedProps"] == {"streamSubgraphs": False, "userId": "u-7"}
    assert "resume" not in body


async def test_the_answer_to_an_interrupt_is_sent_as_command_resume_and_resume(
    scripted: FixturePeer,
) -> None:
    scripted.reply(
        "/agent",
        Reply.sse(
            [
                {"type": "RUN_STARTED", "threadId": "agent-thread", "runId": "r1"},
                {
                    "type": "RUN_FINISHED",
                    "threadId": "agent-thread",
                    "runId": "r1",
                    "outcome": {
                        "type": "interrupt",
                        "interrupts": [
                            {"id": "int-1", "reason": "approval", "message": "Approve?"}
                        ],
                    },
                },
            ]
        ),
    )
    events, run = await run_turn(agent_request("forecaster", [text("u1", "go")]))
    assert run.status == RunStatus.INTERRUPTED
    (interrupt,) = [e for e in events if isinstance(e, MetaEvent)]
    assert (interrupt.name, interrupt.value) == ("LangGraphInterruptEvent", "Approve?")

    scripted.reply("/agent", Reply.sse(RUN))
    _, run = await run_turn(
        agent_request(
            "forecaster",
            [text("u1", "go")],
            meta_events=[
                {"name": "LangGraphInterruptEvent", "value": "Approve?", "response": "approved"}
            ],
        )
    )

    assert run.status == RunStatus.SUCCEEDED
    body = scripted.requests[-1].body
    assert body["forwardedProps"]["command"] == {"resume": "approved"}
    assert body["resume"] == [{"interruptId": "int-1", "status": "resolved", "payload": "approved"}]


@pytest.mark.parametrize(
    ("reply", "code", "words"),
    [
        (Reply.sse([*RUN[:4], "data: {not json"]), "AGENT_BAD_EVENT", "not JSON"),
        (Reply.sse(RUN, cut_after=4), "AGENT_STREAM_INTERRUPTED", "broke off"),
        (
            Reply.sse([*RUN[:4], {"type": "RUN_ERROR", "message": "model overloaded"}]),
            "AGENT_ERROR",
            "model overloaded",
        ),
        (Reply.json({"detail": "bad input"}, status=422), "AGENT_ENDPOINT_HTTP_ERROR", "HTTP 422"),
    ],
)
async def test_failures_name_the_agent_and_keep_the_partial_output(
    scripted: FixturePeer, reply: Reply, code: str, words: str
) -> None:
    scripted.reply("/agent", reply)

    events, run = await run_turn(agent_request("forecaster", [text("u1", "go")]))

    assert run.status == RunStatus.FAILED
    assert run.error_code == code
    error = next(e for e in events if isinstance(e, RunError))
    assert words in error.message
    if code != "AGENT_ERROR":
        assert "AG-UI agent 'forecaster'" in error.message
    if any(isinstance(e, TextStart) for e in events):
        partial = await Message.objects.aget(thread__thread_id="agent-thread", role="assistant")
        assert (partial.content, partial.status) == ("On", "failed")


# --- against a real LangGraph graph (ag-ui-langgraph) -------------------------------------------


@pytest.fixture
def langgraph_agent(fake_upstream) -> Iterator[UvicornServer]:
    with (
        UvicornServer(langgraph_app(fake_upstream.base_url)) as server,
        override_settings(COPILOT_RUNTIME=_settings(server.url + AGENT_PATH, ACTIONS=[])),
    ):
        yield server


async def test_a_langgraph_graph_streams_keeps_state_and_resumes_after_its_interrupt(
    langgraph_agent: UvicornServer, fake_upstream
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"text": "It is sunny in Paris."},
        {"text": "Thanks, published."},
    )
    history = [text("u1", "Weather in Paris?")]

    events, run = await run_turn(agent_request("forecaster", history))

    assert run.status == RunStatus.INTERRUPTED
    assert streamed_text(events) == "It is sunny in Paris."
    (call,) = [e for e in events if isinstance(e, ActionStart)]
    assert call.action_name == "get_weather"
    (result,) = [e for e in events if isinstance(e, ActionResult)]
    assert result.result == "Sunny in Paris, 21 degrees"
    (interrupt,) = [e for e in events if isinstance(e, MetaEvent)]
    assert json.loads(interrupt.value) == {
        "question": "Publish this forecast?",
        "forecast": "It is sunny in Paris.",
    }
    assert (await Thread.objects.aget(thread_id="agent-thread")).status == ThreadStatus.INTERRUPTED

    events, run = await run_turn(
        agent_request(
            "forecaster",
            history,
            meta_events=[
                {"name": "LangGraphInterruptEvent", "value": interrupt.value, "response": "yes"}
            ],
        )
    )

    assert run.status == RunStatus.SUCCEEDED
    assert streamed_text(events) == "Thanks, published."
    loaded = await sync_to_async(agent_state_load)(
        thread_id="agent-thread", agent_name="forecaster", user=AnonymousUser()
    )
    assert loaded.state == {"forecast": "It is sunny in Paris.", "approved": "yes"}
    # This client resent only its first message: the rest of run 1 is superseded.
    contents = [m.get("content") for m in loaded.messages if "content" in m]
    assert contents == ["Weather in Paris?", "Thanks, published."]
    # The graph's own model calls went to the fake upstream.
    assert len(fake_upstream.requests()) == 3
