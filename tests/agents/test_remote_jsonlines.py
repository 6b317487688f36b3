"""Remote endpoint agents reading JSON-lines streams in both formats, served from fixtures by a
loopback server: what is sent, what is streamed and stored, and the failures (malformed
lines, a stream that stops mid-way, an agent error, a down or unknown endpoint)."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from conversations.models import AgentState, Message, RunStatus, Thread, ThreadStatus
from conversations.selectors import thread_pending_interrupt
from copilot_runtime.events import (
    ActionStart,
    AgentStateSnapshot,
    MetaEvent,
    RunError,
    TextStart,
)
from copilot_runtime.events.request import InputMessage
from tests.support.agent_turns import agent_request, run_turn, streamed_text, text
from tests.support.fixture_peer import FixturePeer, Reply, fixture_lines

pytestmark = pytest.mark.django_db(transaction=True)

EXECUTE = "/copilotkit/agents/execute"
INFO = "/copilotkit/info"


@pytest.fixture
def peer() -> Iterator[FixturePeer]:
    with FixturePeer() as server:
        # The endpoint offers no actions of its own.
        server.reply(INFO, Reply.json({"actions": [], "agents": [{"name": "crew"}]}))
        yield server


def _settings(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "EVENT_FLUSH_MS": 5,
        "ACTIONS": ["tests.support.actions.server_add"],
        "REMOTE_RETRY_BASE_SECONDS": 0.01,
        "REMOTE_RETRY_MAX_SECONDS": 0.02,
        "REMOTE_ENDPOINTS": [
            {"name": "crew-endpoint", "url": url + "/copilotkit", "headers": {"X-Key": "k1"}}
        ],
        "AGENTS": {
            "planner": {"kind": "remote", "endpoint": "crew-endpoint", "agent": "crew"},
        },
        **extra,
    }


@pytest.fixture
def remote_agent(peer: FixturePeer) -> Iterator[FixturePeer]:
    with override_settings(COPILOT_RUNTIME=_settings(peer.url)):
        yield peer


SAY_HELLO = {
    "name": "sayHello",
    "description": "Say hello in the browser.",
    "jsonSchema": json.dumps({"type": "object", "properties": {"name": {"type": "string"}}}),
    "available": "enabled",
}


async def test_runtime_event_lines_are_streamed_stored_and_named_locally(
    remote_agent: FixturePeer,
) -> None:
    remote_agent.reply(EXECUTE, Reply.lines(fixture_lines("runtime_events.jsonl")))

    events, run = await run_turn(
        agent_request(
            "planner",
            [text("u1", "Plan a trip")],
            actions=[SAY_HELLO],
            properties={"tenant": "acme"},
            agent_states=[
                {
                    "agentName": "planner",
                    "state": json.dumps({"budget": 100}),
                    "config": json.dumps({"configurable": {"x": 1}}),
                }
            ],
            node_name="plan",
        )
    )

    assert run.status == RunStatus.SUCCEEDED
    assert streamed_text(events) == "Planning your trip."
    states = [e for e in events if isinstance(e, AgentStateSnapshot)]
    # Named after this runtime's agent and thread, whatever the endpoint calls them.
    assert {(s.agent_name, s.thread_id) for s in states} == {("planner", "agent-thread")}
    stored = [s.state async for s in AgentState.objects.filter(agent_name="planner").order_by("id")]
    assert stored == [{"step": 1}, {"step": 2, "days": 3}]
    rows = [
        (m.kind, m.action_name or m.content, m.arguments)
        async for m in Message.objects.filter(thread__thread_id="agent-thread").order_by("position")
    ]
    assert rows == [
        ("text", "Plan a trip", None),
        ("text", "Planning your trip.", None),
        ("action_execution", "showItinerary", {"days": 3}),
    ]

    (sent,) = remote_agent.requests_to(EXECUTE)
    assert sent.headers["x-key"] == "k1"
    body = sent.body
    assert body["name"] == "crew"
    assert body["threadId"] == "agent-thread"
    assert body["nodeName"] == "plan"
    assert body["messages"] == [
        {
            "id": "u1",
            "createdAt": "2025-01-01T00:00:00.000Z",
            "type": "TextMessage",
            "content": "Plan a trip",
            "role": "user",
        }
    ]
    assert body["state"] == {"budget": 100}
    assert body["config"] == {"configurable": {"x": 1}}
    assert body["properties"] == {"tenant": "acme"}
    assert [a["name"] for a in body["actions"]] == ["serverAdd", "sayHello"]
    assert body["actions"][1]["parameters"]["properties"] == {"name": {"type": "string"}}
    assert "metaEvents" not in body


async def test_langgraph_lines_interrupt_and_the_answer_is_forwarded(
    remote_agent: FixturePeer,
) -> None:
    remote_agent.reply(EXECUTE, Reply.lines(fixture_lines("langgraph_events.jsonl")))

    events, run = await run_turn(agent_request("planner", [text("u1", "Fly me to Oslo")]))

    assert streamed_text(events) == "Looking it up.Found 2 flights."
    assert [e.action_name for e in events if isinstance(e, ActionStart)] == ["searchFlights"]
    (interrupt,) = [e for e in events if isinstance(e, MetaEvent)]
    assert interrupt.name == "CopilotKitLangGraphInterruptEvent"
    assert run.status == RunStatus.INTERRUPTED
    thread = await Thread.objects.aget(thread_id="agent-thread")
    assert thread.status == ThreadStatus.INTERRUPTED
    pending = await sync_to_async(thread_pending_interrupt)(thread_pk=thread.pk)
    assert pending[0]["data"]["value"] == '{"question": "Book the 9am flight?"}'

    remote_agent.reply(EXECUTE, Reply.lines(fixture_lines("runtime_events.jsonl")))
    _, run = await run_turn(
        agent_request(
            "planner",
            [text("u1", "Fly me to Oslo")],
            meta_events=[{"name": "CopilotKitLangGraphInterruptEvent", "response": "yes"}],
        )
    )

    assert run.status == RunStatus.SUCCEEDED
    resumed = remote_agent.requests_to(EXECUTE)[-1].body
    # The value comes from the persisted interrupt when the client did not resend it.
    assert resumed["metaEvents"] == [
        {
            "name": "CopilotKitLangGraphInterruptEvent",
            "value": '{"question": "Book the 9am flight?"}',
            "response": "yes",
        }
    ]
    thread = await Thread.objects.aget(thread_id="agent-thread")
    assert thread.status == ThreadStatus.IDLE


async def test_malformed_lines_are_skipped_and_logged(
    remote_agent: FixturePeer, caplog: pytest.LogCaptureFixture
) -> None:
    remote_agent.reply(EXECUTE, Reply.lines(fixture_lines("malformed.jsonl")))

    with caplog.at_level(logging.WARNING, logger="agents.remote.runner"):
        events, run = await run_turn(agent_request("planner", [text("u1", "go")]))

    assert run.status == RunStatus.SUCCEEDED
    assert streamed_text(events) == "Before and after."
    warnings = [r.getMessage() for r in caplog.records if r.name == "agents.remote.runner"]
    assert len(warnings) == 2
    assert all("remote endpoint 'crew-endpoint'" in w and "not JSON" in w for w in warnings)


async def test_a_stream_that_stops_midway_fails_clearly_and_keeps_the_partial_output(
    remote_agent: FixturePeer,
) -> None:
    # Cut after the state, the message's start and its first piece of content.
    remote_agent.reply(EXECUTE, Reply.lines(fixture_lines("runtime_events.jsonl"), cut_after=3))

    events, run = await run_turn(agent_request("planner", [text("u1", "Plan a trip")]))

    assert run.status == RunStatus.FAILED
    assert run.error_code == "AGENT_STREAM_INTERRUPTED"
    error = next(e for e in events if isinstance(e, RunError))
    assert "remote endpoint 'crew-endpoint'" in error.message
    assert "broke off" in error.message
    partial = await Message.objects.aget(thread__thread_id="agent-thread", role="assistant")
    assert (partial.content, partial.status) == ("Planning", "failed")
    assert await AgentState.objects.filter(agent_name="planner").acount() == 1


async def test_an_agent_error_line_fails_the_run_keeping_the_partial_text(
    remote_agent: FixturePeer,
) -> None:
    remote_agent.reply(EXECUTE, Reply.lines(fixture_lines("langgraph_error.jsonl")))

    events, run = await run_turn(agent_request("planner", [text("u1", "go")]))

    assert run.status == RunStatus.FAILED
    assert run.error_code == "AGENT_ERROR"
    assert (
        run.error_details["message"] == "The agent reported an error: ValueError: the graph crashed"
    )
    assert "never seen" not in streamed_text(events)
    partial = await Message.objects.aget(thread__thread_id="agent-thread", role="assistant")
    assert (partial.content, partial.status) == ("Partial answ", "failed")


async def test_an_unknown_remote_agent_is_a_clear_error(remote_agent: FixturePeer) -> None:
    remote_agent.reply(EXECUTE, Reply.json({"error": "Agent 'crew' not found."}, status=404))

    events, run = await run_turn(agent_request("planner", [text("u1", "go")]))

    assert run.status == RunStatus.FAILED
    assert run.error_code == "AGENT_ENDPOINT_NOT_FOUND"
    error = next(e for e in events if isinstance(e, RunError))
    assert "Agent 'crew' not found." in error.message


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_down_endpoint_fails_the_run_naming_it(db: None) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with override_settings(COPILOT_RUNTIME=_settings(url)):
        events, run = await run_turn(agent_request("planner", [text("u1", "go")]))

    assert run.status == RunStatus.FAILED
    assert run.error_code == "AGENT_ENDPOINT_UNREACHABLE"
    error = next(e for e in events if isinstance(e, RunError))
    assert f"remote endpoint 'crew-endpoint' ({url}/copilotkit) is unreachable" in error.message
    assert not [e for e in events if isinstance(e, TextStart)]


async def test_discovery_is_cached_per_properties_for_its_ttl(remote_agent: FixturePeer) -> None:
    remote_agent.reply(EXECUTE, Reply.lines(fixture_lines("runtime_events.jsonl")))

    for thread_id, tenant in (("t1", "a"), ("t2", "a"), ("t3", "b")):
        await run_turn(
            agent_request(
                "planner", [text("u1", "go")], thread_id=thread_id, properties={"tenant": tenant}
            )
        )

    infos = remote_agent.requests_to(INFO)
    assert [r.body["properties"] for r in infos] == [{"tenant": "a"}, {"tenant": "b"}]
    assert infos[0].body["frontendUrl"] == "http://127.0.0.1/app"


async def test_a_document_for_a_remote_agent_is_refused_before_the_endpoint_is_called(
    remote_agent: FixturePeer,
) -> None:
    request = agent_request("planner", [text("u1", "Summarise the attachment.")])
    request.messages.append(
        InputMessage(
            id="u1-document-1",
            kind="document",
            role="user",
            content="report.pdf",
            image_format="application/pdf",
            image_bytes="JVBERi0xLjQ=",
            parent_message_id="u1",
        )
    )

    events, run = await run_turn(request)

    assert run.status == RunStatus.FAILED
    assert run.error_code == "UNSUPPORTED_CONTENT"
    error = next(e for e in events if isinstance(e, RunError))
    assert error.message == (
        "The agent 'planner' (a remote endpoint agent) cannot be sent documents; "
        "send the message without them."
    )
    assert remote_agent.requests_to(EXECUTE) == []
