"""The AG-UI 1.0 generation through the real ``@ag-ui/client`` 1.0.4 ``HttpAgent``: text,
reasoning, a server tool, state, a frontend tool and its follow-up, an interrupt and its resume,
a reconnect after the runs and one during a run, and a stop, each with no warning from the
client and every event the server sent valid against the 1.0 JSON Schema (both checked by
``run_agui10``)."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from tests.e2e.agui10_client import run_agui10
from tests.support.generate_e2e import server_env

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

APPROVER = {"kind": "python", "class": "tests.support.python_agents.ApprovalAgent"}


@pytest.fixture
def server(shared_live_server_factory: Any, fake_upstream: FakeUpstream) -> ServedProcess:
    # The built-in agent on the Anthropic adapter, on the fake's Messages API.
    root = fake_upstream.base_url.removesuffix("/v1")
    claude = {"kind": "anthropic", "api_key": "test", "base_url": root, "max_retries": 0}
    agents = {"approver": APPROVER, "claude": {"kind": "llm", "adapter": claude}}
    return shared_live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_AGENTS=json.dumps(agents))
    )


def _fake(text: str, directive: dict[str, Any]) -> str:
    return f"{text}\nFAKE: {json.dumps(directive)}"


def _run(message_id: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"op": "run", "message": {"id": message_id, "content": content}, **extra}


def _command(server: ServedProcess, thread_id: str, *steps: dict[str, Any], **extra: Any) -> dict:
    return {
        "runtimeUrl": f"{server.url}/api/copilotkit",
        "threadId": thread_id,
        "steps": list(steps),
        **extra,
    }


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def _finished(step: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in step, step["error"]
    assert step["raw"][0]["type"] == "RUN_STARTED"
    assert step["raw"][0]["protocolVersion"] == "1.0"
    assert step["raw"][-1]["type"] == "RUN_FINISHED"
    return step["raw"][-1]


def test_text_server_tool_state_and_reconnect(server: ServedProcess) -> None:
    thread_id = f"agui10-{uuid.uuid4()}"
    snapshot = {"todos": ["milk"]}
    set_state = {
        "tool_calls": [{"name": "AGUISendStateSnapshot", "arguments": {"snapshot": snapshot}}]
    }
    add = {"steps": [{"tool_calls": [{"name": "serverAdd", "arguments": {"a": 2, "b": 3}}]}]}
    result = run_agui10(
        _command(
            server,
            thread_id,
            _run("u1", _fake("Hello there", {"reasoning": "Say hi back", "text": "Hi!"})),
            _run("u2", _fake("Keep a list.", set_state)),
            _run("u3", _fake("Add them.", add)),
            {"op": "connect"},
        )
    )
    text, state, tool, replay = result["steps"]

    finished = _finished(text)
    assert finished["outcome"] == {"type": "success"}
    assert "finishReason" not in finished
    assert finished["metadata"] == {"finishReason": "stop"}
    assert "TEXT_MESSAGE_CONTENT" in _types(text["events"])
    assert _types(text["raw"])[1:5] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
    ]

    assert _finished(state)["outcome"] == {"type": "success"}
    assert "STATE_SNAPSHOT" in _types(state["raw"])

    # The server's tool was answered in the run: nothing is left pending for the client.
    assert _finished(tool)["outcome"] == {"type": "success"}
    [answer] = [e for e in tool["raw"] if e["type"] == "TOOL_CALL_RESULT"]
    assert json.loads(answer["content"]) == {"sum": 5}
    assert result["state"] == snapshot

    # connect: the finished runs as one run holding the conversation and the state.
    assert _types(replay["raw"]) == [
        "RUN_STARTED",
        "MESSAGES_SNAPSHOT",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert replay["state"] == snapshot
    assert [m["id"] for m in replay["messages"]] == [m["id"] for m in result["messages"]]


def test_usage_counts_the_input_an_anthropic_model_wrote_to_its_prompt_cache(
    server: ServedProcess,
) -> None:
    usage = {"cache_read_input_tokens": 6, "cache_creation_input_tokens": 4}
    result = run_agui10(
        _command(
            server,
            f"agui10-{uuid.uuid4()}",
            _run("u1", _fake("Remember this.", {"text": "Noted.", "usage": usage})),
            agentId="claude",
        )
    )
    [step] = result["steps"]

    [entry] = _finished(step)["usage"]
    assert entry["provider"] == "anthropic.messages"
    assert (entry["cachedInputTokens"], entry["cacheWriteInputTokens"]) == (6, 4)
    # As 1.0 counts it: the input includes what was read from and written to the cache.
    assert entry["inputTokens"] > 6 + 4
    assert entry["totalTokens"] == entry["inputTokens"] + entry["outputTokens"]


def test_a_frontend_tool_call_is_left_pending_and_its_result_continues(
    server: ServedProcess,
) -> None:
    thread_id = f"agui10-{uuid.uuid4()}"
    call_id = f"call-{uuid.uuid4().hex[:8]}"
    # One step: after the tool's result the model answers with the default "Tool result: ...".
    call = {"name": "confirm", "id": call_id, "arguments": {"q": "ok?"}}
    directive = {"steps": [{"tool_calls": [call]}]}
    tool = {
        "name": "confirm",
        "description": "Ask the user to confirm.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    }
    result = run_agui10(
        _command(
            server,
            thread_id,
            _run("u1", _fake("Ask me.", directive)),
            {"op": "run", "toolResults": [{"id": "r1", "toolCallId": call_id, "text": "yes"}]},
            tools=[tool],
        )
    )
    asked, answered = result["steps"]

    assert _finished(asked)["outcome"] == {"type": "success", "pendingToolCallIds": [call_id]}
    # The result went in as content parts; the model read its text.
    assert _finished(answered)["outcome"] == {"type": "success"}
    assistant = [m for m in result["messages"] if m["role"] == "assistant" and m.get("content")]
    assert assistant[-1]["content"] == "Tool result: yes"


def test_a_reconnect_during_a_run_then_a_stop_finish_both_streams_cancelled(
    server: ServedProcess,
) -> None:
    thread_id = f"agui10-{uuid.uuid4()}"
    stop = {
        "op": "stop",
        "message": {"id": "u1", "content": _fake("Count.", {"tokens": 3000, "delay_ms": 10})},
        "afterContentEvents": 3,
        "connectFirst": True,
    }
    result = run_agui10(_command(server, thread_id, stop))
    [step] = result["steps"]

    assert step["stopResponse"]["body"]["stopped"] is True
    ran, reconnected = (
        next(r["events"] for r in step["responses"] if r["url"].endswith(route))
        for route in ("/run", "/connect")
    )
    for events in (ran, reconnected):
        assert events[0]["type"] == "RUN_STARTED"
        assert events[0]["protocolVersion"] == "1.0"
        assert _types(events)[-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
        assert events[-1]["outcome"] == {"type": "cancelled"}
    # The connect replayed what was out, then followed the run live to the same text.
    text = "".join(e["delta"] for e in ran if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text.startswith("t0 t1 t2")
    assert step["connectMessages"][-1]["content"] == text


def test_an_interrupt_and_its_resume(server: ServedProcess) -> None:
    thread_id = f"agui10-{uuid.uuid4()}"
    result = run_agui10(
        _command(
            server,
            thread_id,
            _run("u1", "ship it"),
            {"op": "connect"},
            {"op": "run", "resolve": "approved"},
            agentId="approver",
        )
    )
    paused, reconnected, resumed = result["steps"]

    outcome = _finished(paused)["outcome"]
    assert outcome["type"] == "interrupt"
    [interrupt] = outcome["interrupts"]
    assert interrupt["reason"] == "input_required"
    assert json.loads(interrupt["message"]) == {"question": "Ship the order?"}
    # A client reconnecting to the paused thread is told the same interrupt is pending.
    assert reconnected["raw"][-1]["outcome"] == outcome
    assert reconnected["pendingInterrupts"] == [interrupt]
    # The client answered the interrupt by its id; the agent read the payload.
    assert resumed["resume"] == [
        {"interruptId": interrupt["id"], "status": "resolved", "payload": "approved"}
    ]
    assert _finished(resumed)["outcome"] == {"type": "success"}
    assert result["messages"][-1]["content"] == "Decision recorded: approved."
    assert result["state"] == {"decision": "approved"}
