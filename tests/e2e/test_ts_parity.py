"""What the real v2 client sees from this runtime against what it sees from the TypeScript
runtime 1.75 (benchmarks/peers/v2, its BuiltInAgent), on the same fake upstream, scenario by
scenario: the events of each run (deltas joined, ids and timestamps aside), the state they
carry, what each runtime sent the model, and how each refuses a body that is not JSON.

Reasoning is not compared here: this TypeScript runtime's model is the AI SDK's OpenAI chat
provider, which does not read a chat completion's reasoning deltas, so it streams none."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from benchmarks import peers
from tests.e2e.agui_client import run_agui
from tests.e2e.js_client import ensure_js_clients_installed
from tests.support.workers import free_port

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess, ServedProcesses

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

STATE_TOOLS = ("AGUISendStateSnapshot", "AGUISendStateDelta")
# Deltas are joined differently by each runtime (ours joins what one read delivered).
_DELTAS = ("TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "REASONING_MESSAGE_CONTENT")


@pytest.fixture(scope="module")
def ts_runtime(
    _module_servers: tuple[ServedProcesses, dict[Any, Any]], _fake_upstream_server: FakeUpstream
) -> Iterator[ServedProcess]:
    """The TypeScript runtime 1.75 serving its BuiltInAgent on the fake upstream."""
    ensure_js_clients_installed()  # installs the peer's folder too (tests/e2e/js/install.sh)
    processes, _ = _module_servers
    port = free_port()
    command = peers.peer_command(
        peers.V2, port=port, upstream_base_url=_fake_upstream_server.base_url
    )
    yield processes.start(command, port=port, env={"PATH": "/usr/bin:/bin"}, timeout=60)


def _joined(step: dict[str, Any]) -> list[str]:
    """The step's event types, each run of one kind of delta counted once."""
    kinds: list[str] = []
    for event in step["events"]:
        kind = event["type"]
        if kind in _DELTAS and kinds and kinds[-1] == kind:
            continue
        kinds.append(kind)
    return kinds


def _both(
    ours: ServedProcess,
    ts: ServedProcess,
    fake: FakeUpstream,
    steps: list[dict[str, Any]],
    *,
    script: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> tuple[tuple[dict[str, Any], list[dict[str, Any]]], ...]:
    """The same steps through the real v2 client against each runtime, each on a thread of
    its own (the model replying ``script`` to each): (the client's result, the model requests
    that runtime made) for TS, then ours."""
    out = []
    for runtime in (ts, ours):
        if script:
            fake.script(*script)
        before = len(fake.requests())
        result = run_agui(
            {
                "runtimeUrl": f"{runtime.url}/api/copilotkit",
                "agentId": "default",
                "threadId": f"parity-{uuid.uuid4()}",
                "steps": steps,
                **extra,
            }
        )
        assert result["errors"] == [], result
        out.append((result, fake.requests()[before:]))
    return tuple(out)


def _run(content: str, message_id: str) -> dict[str, Any]:
    return {"op": "run", "message": {"id": message_id, "content": content}}


def _fake(directive: dict[str, Any], text: str = "") -> str:
    return (text + "\nFAKE: " if text else "FAKE: ") + json.dumps(directive)


def _state_tools(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in request.get("tools", []) if t["function"]["name"] in STATE_TOOLS]


def test_the_state_tools_scenarios_match_the_typescript_runtime(
    server: ServedProcess, ts_runtime: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    delta = [
        {"op": "add", "path": "/todos/-", "value": {"title": "milk"}},
        {"op": "add", "path": "/owner", "value": "Ann"},
    ]
    snapshot = {"todos": [], "owner": "Bob"}
    call = "Update the state."
    steps = [
        _run(
            _fake({"tool_calls": [{"name": STATE_TOOLS[1], "arguments": {"delta": delta}}]}, call),
            "u1",
        ),
        _run(
            _fake(
                {"tool_calls": [{"name": STATE_TOOLS[0], "arguments": {"snapshot": snapshot}}]},
                call,
            ),
            "u2",
        ),
        _run(_fake({"text": "Done."}), "u3"),
    ]
    (ts, ts_requests), (ours, our_requests) = _both(server, ts_runtime, fake_upstream, steps)

    for ts_step, our_step in zip(ts["steps"], ours["steps"], strict=True):
        assert _joined(our_step) == _joined(ts_step)
        for kind, field in (
            ("STATE_DELTA", "delta"),
            ("STATE_SNAPSHOT", "snapshot"),
            ("TOOL_CALL_RESULT", "content"),
        ):
            theirs = [e[field] for e in ts_step["events"] if e["type"] == kind]
            assert [e[field] for e in our_step["events"] if e["type"] == kind] == theirs
    assert ours["state"] == ts["state"] == {"todos": [], "owner": "Bob"}

    # What the model was offered and told, request by request.
    assert len(our_requests) == len(ts_requests) == 3
    for theirs, mine in zip(ts_requests, our_requests, strict=True):
        assert _state_tools(mine) == _state_tools(theirs)
        assert mine.get("tool_choice") == theirs.get("tool_choice")
        system = [m["content"] for m in theirs["messages"] if m["role"] == "system"]
        assert [m["content"] for m in mine["messages"] if m["role"] == "system"] == system


def _shape(messages: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """Echoed messages by role and fields (ids are each runtime's own)."""
    return [(m["role"], sorted(m)) for m in messages]


def test_a_frontend_tool_calls_follow_up_echoes_what_the_typescript_runtime_echoes(
    server: ServedProcess, ts_runtime: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    script = [
        {"tool_calls": [{"name": "sayHello", "arguments": {"name": "Bob"}}]},
        {"text": "I said hello to Bob"},
        {"text": "Again"},
    ]
    steps = [_run("Greet Bob", "u1"), _run("Once more", "u2")]
    tool = {"name": "sayHello", "properties": {"name": "string"}, "result": "Said"}
    (ts, _), (ours, _) = _both(
        server, ts_runtime, fake_upstream, steps, script=script, tools=[tool]
    )

    def echoes(result: dict[str, Any]) -> list[list[tuple[str, list[str]]]]:
        return [
            _shape(event["input"]["messages"])
            for step in result["steps"]
            for event in step["events"]
            if event["type"] == "RUN_STARTED"
        ]

    assert echoes(ours) == echoes(ts)
    assert [_joined(step) for step in ours["steps"]] == [_joined(step) for step in ts["steps"]]


def test_a_body_that_is_not_json_is_refused_as_the_typescript_runtime_refuses_it(
    server: ServedProcess, ts_runtime: ServedProcess
) -> None:
    answers = []
    # The TypeScript runtime's single-route endpoint, and ours (both modes at one URL).
    for url in (f"{ts_runtime.url}/single/api/copilotkit", f"{server.url}/api/copilotkit"):
        response = httpx.post(
            url,
            content=b"hello",
            headers={"content-type": "text/plain"},
        )
        answers.append((response.status_code, response.headers["content-type"], response.json()))
    assert answers[1] == answers[0]
    assert answers[0][0] == 415
