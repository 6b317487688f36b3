"""The shared state tools of v2 chat turns (engine/state_tools.py), against the TypeScript
runtime 1.75's built-in agent: what the model is offered and shown, how calls change the state,
and the events a v2 client gets."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.test import override_settings

from copilot_runtime.adapters.openai_adapter import OpenAIAdapter
from copilot_runtime.agui.run_input import run_input_parse, turn_request_from_run_input
from copilot_runtime.agui.translate import Translator
from copilot_runtime.engine.chat import chat_turn_events, configured_chat_turn
from copilot_runtime.engine.state_tools import (
    DELTA_TOOL,
    SNAPSHOT_TOOL,
    run_state_tool,
    state_prompt_section,
    with_state_prompt,
)
from copilot_runtime.events import ActionResult, AgentStateSnapshot, Event
from copilot_runtime.events.request import TurnRequest
from copilot_runtime.graphql.turn_input import parse_generate_input
from tests.support.generate_e2e import runtime_settings

# index.mjs:598-628 as the AI SDK serialises it (fact sheet 1.2), verbatim.
TS_SNAPSHOT_SCHEMA = (
    '{"type":"object","properties":{"snapshot":{"description":"The complete new state object"}},'
    '"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}'
)
TS_DELTA_SCHEMA = (
    '{"type":"object","properties":{"delta":{"type":"array","items":{"type":"object",'
    '"properties":{"op":{"type":"string","enum":["add","replace","remove"],'
    '"description":"The operation to perform"},"path":{"type":"string",'
    '"description":"JSON Pointer path (e.g., \'/foo/bar\')"},"value":{"description":'
    "\"The value to set. Required for 'add' and 'replace' operations, ignored for "
    '\'remove\'."}},"required":["op","path"],"additionalProperties":false},'
    '"description":"Array of JSON Patch operations"}},"required":["delta"],'
    '"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}'
)
# The state section TS builds for {a: 1, list: []} (fact sheet 1.4), verbatim.
TS_STATE_SECTION = (
    "\n## Application State\nThis is state from the application that you can edit by calling "
    'AGUISendStateSnapshot or AGUISendStateDelta.\n```json\n{\n  "a": 1,\n  "list": []\n}\n```\n'
)


def _fake(directive: dict[str, Any]) -> str:
    return "FAKE: " + orjson.dumps(directive).decode()


def _v2_request(text: str, *, state: Any, **extra: Any) -> TurnRequest:
    parsed = run_input_parse(
        {
            "threadId": "state-thread",
            "runId": "3535bc51-1d2c-4364-9bb5-a1abd07a8837",
            "tools": [],
            "context": [],
            "forwardedProps": {},
            "state": state,
            "messages": [{"id": "u1", "role": "user", "content": text}],
            **extra,
        }
    )
    request = turn_request_from_run_input(parsed, agent_name="default")
    request.state = dict(state) if isinstance(state, dict) else {}
    return request


def _v1_request(text: str) -> TurnRequest:
    request = parse_generate_input(
        {
            "threadId": "state-thread",
            "frontend": {"actions": []},
            "messages": [
                {
                    "id": "u1",
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "textMessage": {"content": text, "role": "user"},
                }
            ],
            "metadata": {"requestType": "Chat"},
        },
        {},
    )
    request.state = {"a": 1}
    return request


async def _run(fake_upstream: Any, request: TurnRequest) -> list[Event]:
    adapter = OpenAIAdapter(
        api_key="t", base_url=fake_upstream.base_url, model="m", timeout=10, max_retries=0
    )
    turn = configured_chat_turn(request=request, adapter=adapter, server_actions={})
    return [event async for event in chat_turn_events(turn)]


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def _tools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["function"]["name"]: tool["function"] for tool in body.get("tools") or []}


# --- the prompt and the tools -----------------------------------------------------------------


def test_the_state_section_is_ts_s_text() -> None:
    assert state_prompt_section({"a": 1, "list": []}) == TS_STATE_SECTION


@pytest.mark.parametrize("empty", [None, {}, []])
def test_an_empty_state_gets_no_section(empty: Any) -> None:
    assert state_prompt_section(empty) is None
    conversation = [{"role": "user", "content": "hi"}]
    assert with_state_prompt(conversation=conversation, state=empty) is conversation


def test_the_section_joins_the_leading_system_prompt_or_leads_on_its_own() -> None:
    state = {"a": 1, "list": []}
    user = {"role": "user", "content": "hi"}
    assert with_state_prompt(conversation=[user], state=state) == [
        {"role": "system", "content": TS_STATE_SECTION},
        user,
    ]
    system = {"role": "system", "content": "Be brief."}
    joined = with_state_prompt(conversation=[system, user], state=state)
    assert joined == [{"role": "system", "content": "Be brief." + TS_STATE_SECTION}, user]
    assert system == {"role": "system", "content": "Be brief."}  # shared entries untouched


async def test_a_v2_turn_offers_ts_s_state_tools_with_auto_and_shows_the_state(
    fake_upstream: Any,
) -> None:
    with override_settings(COPILOT_RUNTIME=runtime_settings(fake_upstream.base_url)):
        await _run(fake_upstream, _v2_request("hello", state={"a": 1, "list": []}))
    (body,) = fake_upstream.requests()
    tools = _tools(body)
    assert list(tools) == [SNAPSHOT_TOOL, DELTA_TOOL]
    assert tools[SNAPSHOT_TOOL]["description"] == (
        "Replace the entire application state with a new snapshot"
    )
    assert tools[DELTA_TOOL]["description"] == (
        "Apply incremental updates to application state using JSON Patch operations"
    )
    assert tools[SNAPSHOT_TOOL]["parameters"] == orjson.loads(TS_SNAPSHOT_SCHEMA)
    assert tools[DELTA_TOOL]["parameters"] == orjson.loads(TS_DELTA_SCHEMA)
    assert all("strict" not in tool for tool in tools.values())
    assert body["tool_choice"] == "auto"
    assert body["messages"][0]["content"] == TS_STATE_SECTION


async def test_an_empty_state_still_gets_the_tools_but_no_section(fake_upstream: Any) -> None:
    with override_settings(COPILOT_RUNTIME=runtime_settings(fake_upstream.base_url)):
        await _run(fake_upstream, _v2_request("hello", state={}))
    (body,) = fake_upstream.requests()
    assert list(_tools(body)) == [SNAPSHOT_TOOL, DELTA_TOOL]
    assert [m["role"] for m in body["messages"]] == ["user"]


async def test_v1_turns_and_agents_that_turn_them_off_get_neither(fake_upstream: Any) -> None:
    off = runtime_settings(fake_upstream.base_url, AGENTS={"default": {"state_tools": False}})
    with override_settings(COPILOT_RUNTIME=runtime_settings(fake_upstream.base_url)):
        await _run(fake_upstream, _v1_request("hello"))
    with override_settings(COPILOT_RUNTIME=off):
        await _run(fake_upstream, _v2_request("hello", state={"a": 1}))
    for body in fake_upstream.requests():
        assert "tools" not in body and "tool_choice" not in body
        assert all("Application State" not in str(m["content"]) for m in body["messages"])


# --- applying calls ---------------------------------------------------------------------------


def _delta(state: dict[str, Any], *ops: dict[str, Any]):
    return run_state_tool(name=DELTA_TOOL, arguments=orjson.dumps({"delta": ops}), state=state)


def test_a_delta_adds_replaces_and_removes() -> None:
    state = {"a": 1, "list": [1], "gone": True}
    outcome = _delta(
        state,
        {"op": "replace", "path": "/a", "value": 2},
        {"op": "add", "path": "/list/-", "value": 2},
        {"op": "remove", "path": "/gone", "from": "/ignored"},
    )
    assert outcome.state == {"a": 2, "list": [1, 2]}
    assert state == {"a": 1, "list": [1], "gone": True}
    assert not outcome.is_error
    # TS answers with the operations as its schema parsed them (unknown keys stripped).
    assert orjson.loads(outcome.result) == {
        "success": True,
        "delta": [
            {"op": "replace", "path": "/a", "value": 2},
            {"op": "add", "path": "/list/-", "value": 2},
            {"op": "remove", "path": "/gone"},
        ],
    }


def test_appending_to_a_missing_array_creates_it_as_ts_does() -> None:
    outcome = _delta({}, {"op": "add", "path": "/todos/-", "value": "x"})
    assert outcome.state == {"todos": ["x"]}
    assert outcome.delta == [
        {"op": "add", "path": "/todos", "value": []},
        {"op": "add", "path": "/todos/-", "value": "x"},
    ]


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "replace", "path": "/missing", "value": 1}],
        [{"op": "add", "path": "/a"}],
        [{"op": "move", "path": "/a", "from": "/b"}],
        [{"op": "remove", "path": "/a"}, {"op": "remove", "path": "/a"}],
        [{"op": "replace", "path": "", "value": [1]}],
    ],
)
def test_a_patch_that_cannot_apply_changes_nothing_and_tells_the_model(
    ops: list[dict[str, Any]],
) -> None:
    outcome = _delta({"a": 1}, *ops)
    assert outcome.is_error and outcome.state is None
    assert orjson.loads(outcome.result)["error"]["code"] == "INVALID_STATE_UPDATE"


def test_a_snapshot_replaces_and_a_missing_one_changes_nothing() -> None:
    replaced = run_state_tool(name=SNAPSHOT_TOOL, arguments='{"snapshot":{"b":2}}', state={"a": 1})
    assert replaced.state == {"b": 2} and replaced.delta is None
    assert replaced.result == '{"success":true,"snapshot":{"b":2}}'
    missing = run_state_tool(name=SNAPSHOT_TOOL, arguments="{}", state={"a": 1})
    assert (missing.state, missing.result, missing.is_error) == (None, '{"success":true}', False)
    scalar = run_state_tool(name=SNAPSHOT_TOOL, arguments='{"snapshot":3}', state={"a": 1})
    assert scalar.is_error and scalar.state is None


# --- events -----------------------------------------------------------------------------------


def _agui(events: list[Event], client_state: dict[str, Any]) -> list[dict[str, Any]]:
    translator = Translator(
        thread_id="state-thread", run_id="r", state_deltas=True, client_state=client_state
    )
    return [
        event
        for event in translator.translate_all(events)
        if event["type"] not in ("RUN_STARTED", "RUN_FINISHED", "TOOL_CALL_ARGS")
    ]


async def test_a_delta_call_ends_the_turn_with_ts_s_events(fake_upstream: Any) -> None:
    ops = [{"op": "add", "path": "/b", "value": {"c": [1, 2, 3]}}]
    request = _v2_request(_fake(_call(DELTA_TOOL, {"delta": ops})), state={"a": 1})
    with override_settings(COPILOT_RUNTIME=runtime_settings(fake_upstream.base_url)):
        events = await _run(fake_upstream, request)
    assert len(fake_upstream.requests()) == 1  # no further model step, as TS (maxSteps 1)
    (snapshot,) = [e for e in events if isinstance(e, AgentStateSnapshot)]
    assert snapshot.state == {"a": 1, "b": {"c": [1, 2, 3]}}
    out = _agui(events, {"a": 1})
    # The run's first patch comes after the state it starts from, as TS sends it.
    assert [e["type"] for e in out] == [
        "TOOL_CALL_START",
        "TOOL_CALL_END",
        "STATE_SNAPSHOT",
        "STATE_DELTA",
        "TOOL_CALL_RESULT",
    ]
    assert out[0]["toolCallName"] == DELTA_TOOL
    assert out[2]["snapshot"] == {"a": 1}
    assert out[3]["delta"] == ops
    assert orjson.loads(out[4]["content"]) == {"success": True, "delta": ops}


async def test_a_snapshot_call_is_sent_as_a_snapshot(fake_upstream: Any) -> None:
    request = _v2_request(
        _fake(_call(SNAPSHOT_TOOL, {"snapshot": {"a": 1, "b": 2}})), state={"a": 1}
    )
    with override_settings(COPILOT_RUNTIME=runtime_settings(fake_upstream.base_url)):
        events = await _run(fake_upstream, request)
    out = _agui(events, {"a": 1})
    assert [e["type"] for e in out][-2:] == ["STATE_SNAPSHOT", "TOOL_CALL_RESULT"]
    assert out[-2]["snapshot"] == {"a": 1, "b": 2}
    assert out[-1]["content"] == '{"success":true,"snapshot":{"a":1,"b":2}}'


async def test_a_failed_update_goes_back_to_the_model(fake_upstream: Any) -> None:
    bad = _call(DELTA_TOOL, {"delta": [{"op": "replace", "path": "/nope", "value": 1}]})
    steps = [bad, {"text": "Sorry"}]
    request = _v2_request(_fake({"steps": steps}), state={"a": 1})
    with override_settings(COPILOT_RUNTIME=runtime_settings(fake_upstream.base_url)):
        events = await _run(fake_upstream, request)
    assert not [e for e in events if isinstance(e, AgentStateSnapshot)]
    (result,) = [e for e in events if isinstance(e, ActionResult)]
    assert result.is_error and "INVALID_STATE_UPDATE" in result.result
    _first, second = fake_upstream.requests()
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": result.action_execution_id,
        "content": result.result,
    }
