"""CopilotKit v2 end to end: the real frontend core (``@copilotkit/core`` 1.75.0 with
``@ag-ui/client`` 0.0.59) against the served process, as the React provider drives it.

Each test starts daphne on the test database with the fake OpenAI upstream, runs the core in
Node through ``tests/e2e/js/agui/agui_client.cjs`` (runtime info auto-detection, then runs,
connects and stops), and checks the wire, the client's view and what the server stored.
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from conversations.models import Message, Run, RunStatus
from tests.e2e.agui_client import run_agui, sse_frames, step_types
from tests.e2e.js_client import run_js
from tests.support.generate_e2e import (
    finished_run,
    generate_command,
    generate_data,
    run_events,
    text_input,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

SAY_HELLO = {
    "name": "sayHello",
    "description": "Say hello to someone in the browser.",
    "properties": {"name": "string"},
    "result": "Hello said to Bob",
}


def fake(directive: dict[str, Any]) -> str:
    return "FAKE: " + json.dumps(directive)


def command(server: ServedProcess, *steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "runtimeUrl": f"{server.url}/api/copilotkit",
        "agentId": "default",
        "threadId": extra.pop("thread_id", f"agui-{uuid.uuid4()}"),
        "steps": list(steps),
        **extra,
    }


def run_step(content: str, message_id: str = "u1") -> dict[str, Any]:
    return {"op": "run", "message": {"id": message_id, "content": content}}


def exchanges(result: dict[str, Any], marker: str) -> list[dict[str, Any]]:
    return [e for e in result["http"] if marker in e["url"] and e["method"] == "POST"] or [
        e
        for e in result["http"]
        if e["method"] == "POST"
        and isinstance(e.get("requestBody"), dict)
        and e["requestBody"].get("method") == marker
    ]


def assistant_text(result: dict[str, Any]) -> list[str]:
    return [m.get("content") for m in result["messages"] if m["role"] == "assistant"]


def test_a_text_reply_after_runtime_auto_detection(server: ServedProcess) -> None:
    result = run_agui(
        # Paced as a model streams (20 ms a word), so the words reach the runtime in reads of
        # their own and stream as several content events, which the client reassembles.
        command(
            server,
            run_step(fake({"text": "Hello brave new world", "delay_ms": 20})),
            properties={"u": 1},
        )
    )

    assert result["connection"] == "connected", result["stderr"]
    assert result["transport"] == "rest"
    assert result["runtimeVersion"] == "1.75.0"
    assert result["errors"] == []
    info = result["http"][0]
    assert (info["method"], info["url"], info["status"]) == (
        "GET",
        f"{server.url}/api/copilotkit/info",
        200,
    )
    [step] = result["steps"]
    assert step.get("error") is None
    contents = step_types(step).count("TEXT_MESSAGE_CONTENT")
    assert contents >= 2
    assert step_types(step) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        *["TEXT_MESSAGE_CONTENT"] * contents,
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    [run_exchange] = exchanges(result, "/agent/default/run")
    assert run_exchange["status"] == 200
    assert run_exchange["contentType"] == "text/event-stream"
    wire = sse_frames(run_exchange["responseText"])
    deltas = [e["delta"] for e in wire if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert len(deltas) == contents
    assert "".join(deltas) == "Hello brave new world"
    sent = run_exchange["requestBody"]
    assert wire[0]["runId"] == sent["runId"]
    assert sent["forwardedProps"] == {"u": 1}
    assert assistant_text(result) == ["Hello brave new world"]

    run = finished_run(sent["runId"])
    assert run.protocol == "agui"
    assert run.status == RunStatus.SUCCEEDED


def test_a_frontend_tool_call_runs_in_the_client_and_the_follow_up_run_answers(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "sayHello", "arguments": {"name": "Bob"}, "id": "call-hello"}]},
        {"text": "I said hello to Bob"},
    )
    thread_id = f"agui-tool-{uuid.uuid4()}"
    result = run_agui(
        command(server, run_step("Greet Bob please"), thread_id=thread_id, tools=[SAY_HELLO])
    )

    assert result["errors"] == []
    assert result["toolCalls"] == [{"name": "sayHello", "args": {"name": "Bob"}}]
    [step] = result["steps"]
    types = step_types(step)
    # Two runs on one agent: the tool call, then (after the client ran it) the answer.
    assert types.count("RUN_STARTED") == 2
    first_end = types.index("RUN_FINISHED")
    assert types[: first_end + 1] == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",  # the arguments' three fragments came in one read: the first,
        "TOOL_CALL_ARGS",  # then the other two joined
        "TOOL_CALL_END",
        "RUN_FINISHED",
    ]
    start = step["events"][1]
    assert (start["toolCallId"], start["toolCallName"]) == ("call-hello", "sayHello")
    runs = exchanges(result, "/agent/default/run")
    assert len(runs) == 2
    follow_up = runs[1]["requestBody"]
    tool_message = follow_up["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["toolCallId"] == "call-hello"
    assert tool_message["content"] == "Hello said to Bob"
    assert follow_up["tools"][0]["name"] == "sayHello"
    assert assistant_text(result)[-1] == "I said hello to Bob"
    finished_run(follow_up["runId"])
    rows = [
        (row.kind, row.message_id, row.action_execution_id)
        for row in Message.objects.filter(thread__thread_id=thread_id).order_by("position")
    ]
    assert ("action_execution", "call-hello", "") in rows
    assert ("result", tool_message["id"], "call-hello") in rows
    assert rows[-1][0] == "text"


def test_a_server_action_runs_inside_the_same_http_run(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script(
        {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 2, "b": 40}, "id": "add-1"}]},
        {"text": "The sum is 42"},
    )
    result = run_agui(command(server, run_step("Add 2 and 40")))

    [step] = result["steps"]
    types = step_types(step)
    assert types.count("RUN_STARTED") == 1
    assert types.index("TOOL_CALL_END") < types.index("TOOL_CALL_RESULT")
    assert types.index("TOOL_CALL_RESULT") < types.index("TEXT_MESSAGE_START")
    result_event = next(e for e in step["events"] if e["type"] == "TOOL_CALL_RESULT")
    assert result_event["content"] == '{"sum":42}'
    assert result_event["messageId"] == "result-add-1"
    tool_messages = [m for m in result["messages"] if m["role"] == "tool"]
    assert [(m["toolCallId"], m["content"]) for m in tool_messages] == [("add-1", '{"sum":42}')]
    assert assistant_text(result)[-1] == "The sum is 42"
    assert len(exchanges(result, "/agent/default/run")) == 1


def test_an_upstream_error_is_a_run_error_with_http_200(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script({"error": {"status": 500, "message": "upstream exploded"}})
    result = run_agui(command(server, run_step("Hi")))

    [step] = result["steps"]
    assert step_types(step) == ["RUN_STARTED", "RUN_ERROR"]
    assert step["events"][1]["message"]
    [run_exchange] = exchanges(result, "/agent/default/run")
    assert run_exchange["status"] == 200
    assert "Traceback" not in run_exchange["responseText"]
    run = finished_run(run_exchange["requestBody"]["runId"])
    assert run.status == RunStatus.FAILED


def test_connect_after_a_run_replays_it_compacted(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    thread_id = f"agui-replay-{uuid.uuid4()}"
    first = run_agui(
        command(server, run_step(fake({"text": "Hello there friend"})), thread_id=thread_id)
    )
    run_id = exchanges(first, "/agent/default/run")[0]["requestBody"]["runId"]
    finished_run(run_id)

    # A fresh page: a new core connects to the thread and rebuilds the conversation.
    reloaded = run_agui(command(server, {"op": "connect"}, thread_id=thread_id))

    assert reloaded["errors"] == []
    [step] = reloaded["steps"]
    assert step_types(step) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert step["events"][0]["runId"] == run_id
    assert step["events"][2]["delta"] == "Hello there friend"
    assert [(m["role"], m.get("content")) for m in reloaded["messages"]] == [
        ("user", fake({"text": "Hello there friend"})),
        ("assistant", "Hello there friend"),
    ]
    [connect_exchange] = exchanges(reloaded, "/agent/default/connect")
    assert connect_exchange["status"] == 200


def test_connect_during_a_run_replays_it_then_follows_it_live(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    thread_id = f"agui-live-{uuid.uuid4()}"
    tokens = 60
    outcome: dict[str, Any] = {}

    def long_run() -> None:
        outcome["result"] = run_agui(
            command(
                server,
                # Six seconds: time for the connect's client to start on a loaded machine
                # (at 2.4 s a parallel run's connect came after the run had ended).
                run_step(fake({"tokens": tokens, "delay_ms": 100})),
                thread_id=thread_id,
            )
        )

    def some_tokens_logged() -> bool:
        run = Run.objects.filter(thread__thread_id=thread_id).first()
        return run is not None and any(e.type == "text_delta" for e in run_events(run.pk))

    runner = threading.Thread(target=long_run)
    runner.start()
    # Some tokens are out (logged, so a connect replays them), most are still to come.
    wait_for(some_tokens_logged, timeout=15, what="the run's first tokens in its log")

    connected = run_agui(command(server, {"op": "connect"}, thread_id=thread_id))
    runner.join(60)

    [step] = connected["steps"]
    types = step_types(step)
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_FINISHED"
    expected = " ".join(f"t{i}" for i in range(tokens))
    replayed = "".join(e["delta"] for e in step["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert replayed == expected
    # Replayed from the log first (coalesced), then live (one event per token).
    assert 1 < types.count("TEXT_MESSAGE_CONTENT") < tokens + 1
    assert connected["messages"][-1]["content"] == expected
    original = outcome["result"]
    assert assistant_text(original) == [expected]


def test_stop_cancels_the_run_and_its_stream_ends_with_run_finished(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    thread_id = f"agui-stop-{uuid.uuid4()}"
    stop_step = {
        "op": "stop",
        "message": {"id": "u1", "content": fake({"tokens": 3000, "delay_ms": 10})},
        "afterContentEvents": 5,
    }
    result = run_agui(command(server, stop_step, thread_id=thread_id))

    [step] = result["steps"]
    assert step.get("error") is None
    stop_exchanges = [e for e in result["http"] if "/stop/" in e["url"]]
    assert len(stop_exchanges) == 1
    stop = stop_exchanges[0]
    assert stop["url"].endswith(f"/api/copilotkit/agent/default/stop/{thread_id}")
    assert stop["status"] == 200
    assert json.loads(stop["responseText"]) == {
        "stopped": True,
        "interrupt": {"type": "RUN_ERROR", "message": "Run stopped by user", "code": "STOPPED"},
    }
    run_id = stop["requestBody"]["runId"]
    run = finished_run(run_id)
    assert run.status == RunStatus.CANCELLED
    assert fake_upstream.stats()["client_closed"] >= 1
    # The stop reaches the run; the server then ends the stream itself with RUN_FINISHED, and
    # closes the message it was streaming first.
    wire = sse_frames(exchanges(result, "/agent/default/run")[0]["responseText"])
    assert [e["type"] for e in wire][-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    assert step_types(step)[-1] == "RUN_FINISHED"
    partial = Message.objects.get(thread__thread_id=thread_id, role="assistant")
    assert 0 < len(partial.content) < len(" ".join(f"t{i}" for i in range(3000)))


def test_an_unknown_agent_is_a_404_the_client_reports(server: ServedProcess) -> None:
    result = run_agui(command(server, run_step("Hi"), proxyAgentId="ghost"))

    [run_exchange] = exchanges(result, "/agent/ghost/run")
    assert run_exchange["status"] == 404
    assert json.loads(run_exchange["responseText"]) == {
        "error": "Agent not found",
        "message": "Agent 'ghost' does not exist",
    }
    assert any("404" in error["message"] for error in result["errors"]), result["errors"]


def test_a_bad_body_is_a_400_with_details_the_client_reports(server: ServedProcess) -> None:
    result = run_agui(command(server, run_step("Hi"), thread_id="t" * 300))

    [run_exchange] = exchanges(result, "/agent/default/run")
    assert run_exchange["status"] == 400
    body = json.loads(run_exchange["responseText"])
    assert body["error"] == "Invalid request body"
    assert "threadId" in body["details"]
    assert any("400" in error["message"] for error in result["errors"]), result["errors"]


def test_the_single_route_transport_runs_and_stops(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    thread_id = f"agui-single-{uuid.uuid4()}"
    result = run_agui(
        command(
            server,
            run_step(fake({"text": "Over one route"})),
            {
                "op": "stop",
                "message": {"id": "u2", "content": fake({"tokens": 3000, "delay_ms": 10})},
                "afterContentEvents": 3,
            },
            thread_id=thread_id,
            runtimeTransport="single",
        )
    )

    assert result["transport"] == "single"
    assert result["errors"] == []
    envelopes = [
        e["requestBody"]["method"]
        for e in result["http"]
        if isinstance(e.get("requestBody"), dict) and "method" in e["requestBody"]
    ]
    assert envelopes[:2] == ["info", "agent/run"]
    assert "agent/stop" in envelopes
    assert step_types(result["steps"][0])[-1] == "RUN_FINISHED"
    assert assistant_text(result)[0] == "Over one route"
    cancelled = Run.objects.filter(thread__thread_id=thread_id, status=RunStatus.CANCELLED)
    assert cancelled.count() == 1


def test_a_v2_thread_continues_over_graphql_and_loads_back(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    thread_id = f"agui-cross-{uuid.uuid4()}"
    v2 = run_agui(command(server, run_step(fake({"text": "Answer over v2"})), thread_id=thread_id))
    finished_run(exchanges(v2, "/agent/default/run")[0]["requestBody"]["runId"])
    assistant = next(m for m in v2["messages"] if m["role"] == "assistant")

    history = [
        text_input("u1", fake({"text": "Answer over v2"})),
        text_input(assistant["id"], "Answer over v2", role="assistant"),
        text_input("u2", fake({"text": "Answer over v1"})),
    ]
    v1 = run_js(
        "1.10.6", generate_command(server.url, generate_data(thread_id=thread_id, messages=history))
    )
    assert v1["errors"] == []
    finished_run(v1["final"]["runId"])

    loaded = run_js(
        "1.10.6",
        {
            "op": "loadAgentState",
            "url": f"{server.url}/api/copilotkit",
            "threadId": thread_id,
            "agentName": "default",
        },
    )
    assert loaded["data"]["loadAgentState"]["threadExists"] is True
    contents = [(m["role"], m["content"]) for m in loaded["messages"]]
    assert contents == [
        ("user", fake({"text": "Answer over v2"})),
        ("assistant", "Answer over v2"),
        ("user", fake({"text": "Answer over v1"})),
        ("assistant", "Answer over v1"),
    ]

    # And back: a v2 page connects and sees both runs.
    reloaded = run_agui(command(server, {"op": "connect"}, thread_id=thread_id))
    assert [m.get("content") for m in reloaded["messages"]] == [c for _, c in contents]
    threads = httpx.get(f"{server.url}/api/copilotkit/threads/{thread_id}/messages").json()
    assert [m.get("content") for m in threads["messages"]] == [c for _, c in contents]
