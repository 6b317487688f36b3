"""The chat engine's tool loop, against the project's fake OpenAI-compatible upstream."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from copilot_runtime.adapters.openai_adapter import OpenAIAdapter
from copilot_runtime.engine.actions import server_action
from copilot_runtime.engine.chat import MAX_ITERATIONS_CODE, ChatTurn, chat_turn_events
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    Event,
    GenerationEnd,
    GenerationStart,
    RunError,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.graphql.turn_input import parse_generate_input
from tests.support.actions import always_fails, server_add

SAY_HELLO = {
    "name": "sayHello",
    "description": "Say hello",
    "jsonSchema": '{"type":"object","properties":{"name":{"type":"string"}}}',
    "available": "enabled",
}


def _request(text: str, *, actions: list[dict[str, Any]] | None = None, **extra: Any):
    data = {
        "frontend": {"actions": actions or []},
        "messages": [
            {
                "id": "u1",
                "createdAt": "2025-01-01T00:00:00.000Z",
                "textMessage": {"content": text, "role": "user"},
            }
        ],
        "metadata": {"requestType": "Chat"},
        **extra,
    }
    return parse_generate_input(data, {})


def _directive(directive: dict[str, Any]) -> str:
    return "FAKE: " + orjson.dumps(directive).decode()


async def _run(fake_upstream, request, *, actions=(), max_iterations: int = 10) -> list[Event]:
    adapter = OpenAIAdapter(
        api_key="test",
        base_url=fake_upstream.base_url,
        model="fake-model",
        timeout=10,
        max_retries=0,
    )
    turn = ChatTurn(
        request=request,
        adapter=adapter,
        server_actions={action.name: action for action in actions},
        max_iterations=max_iterations,
    )
    return [event async for event in chat_turn_events(turn)]


def _types(events: list[Event]) -> list[type[Event]]:
    return [type(event) for event in events]


async def test_a_text_answer_streams_start_deltas_end_and_usage(fake_upstream) -> None:
    events = await _run(fake_upstream, _request(_directive({"text": "Hello big world"})))

    # The fake writes an unpaced reply's tokens at once, so one read: the first token goes
    # out alone, the rest of the read as one delta.
    assert _types(events) == [
        GenerationStart,
        TextStart,
        TextDelta,
        TextDelta,
        TextEnd,
        GenerationEnd,
    ]
    assert [e.delta for e in events if isinstance(e, TextDelta)] == ["Hello", " big world"]
    end = events[-1]
    assert end.finish_reason == "stop"
    assert end.output_tokens > 0 and end.input_tokens > 0
    sent = fake_upstream.requests()[-1]
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["messages"][-1]["role"] == "user"


async def test_a_frontend_action_ends_the_turn_with_its_call(fake_upstream) -> None:
    request = _request(
        _directive({"tool_calls": [{"name": "sayHello", "arguments": {"name": "Bob"}}]}),
        actions=[SAY_HELLO],
    )
    events = await _run(fake_upstream, request)

    start = next(e for e in events if isinstance(e, ActionStart))
    assert start.action_name == "sayHello"
    args = "".join(e.delta for e in events if isinstance(e, ActionArgs))
    assert orjson.loads(args) == {"name": "Bob"}
    assert any(isinstance(e, ActionEnd) for e in events)
    assert not any(isinstance(e, ActionResult) for e in events)
    assert len(fake_upstream.requests()) == 1
    offered = [tool["function"]["name"] for tool in fake_upstream.requests()[0]["tools"]]
    assert offered == ["sayHello"]


async def test_a_server_action_is_executed_and_its_result_fed_back(fake_upstream) -> None:
    directive = {
        "steps": [
            {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 2}}]},
            {"text": "The sum is 3"},
        ]
    }
    events = await _run(fake_upstream, _request(_directive(directive)), actions=[server_add])

    result = next(e for e in events if isinstance(e, ActionResult))
    assert orjson.loads(result.result) == {"sum": 3}
    assert result.is_error is False
    assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == "The sum is 3"
    second = fake_upstream.requests()[1]["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "serverAdd"
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": result.action_execution_id,
        "content": '{"sum":3}',
    }


async def test_a_failing_server_action_becomes_an_error_result_and_the_turn_goes_on(
    fake_upstream,
) -> None:
    directive = {
        "steps": [
            {"tool_calls": [{"name": "always_fails", "arguments": {"reason": "nope"}}]},
            {"text": "Sorry"},
        ]
    }
    events = await _run(
        fake_upstream, _request(_directive(directive)), actions=[server_action()(always_fails)]
    )

    result = next(e for e in events if isinstance(e, ActionResult))
    assert result.is_error is True
    assert orjson.loads(result.result) == {
        "error": {"code": "HANDLER_ERROR", "message": "the action failed: nope"},
        "result": "",
    }
    assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == "Sorry"


async def test_invalid_arguments_are_reported_to_the_model(fake_upstream) -> None:
    directive = {
        "steps": [
            {"tool_calls": [{"name": "serverAdd", "arguments": "{not json"}]},
            {"text": "ok"},
        ]
    }
    events = await _run(fake_upstream, _request(_directive(directive)), actions=[server_add])
    result = next(e for e in events if isinstance(e, ActionResult))
    assert orjson.loads(result.result)["error"]["code"] == "INVALID_ARGUMENTS"


async def test_the_server_action_loop_is_capped(fake_upstream) -> None:
    directive = {
        "steps": [{"tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 1}}]}],
        "repeat_last": True,
    }
    events = await _run(
        fake_upstream, _request(_directive(directive)), actions=[server_add], max_iterations=3
    )

    assert sum(isinstance(e, GenerationStart) for e in events) == 3
    error = events[-1]
    assert isinstance(error, RunError)
    assert error.code == MAX_ITERATIONS_CODE
    assert "3" in error.message
    assert len(fake_upstream.requests()) == 3


async def test_parallel_tool_calls_stream_as_separate_actions(fake_upstream) -> None:
    directive = {
        "tool_calls": [
            {"name": "sayHello", "arguments": {"name": "Ann"}},
            {"name": "sayHello", "arguments": {"name": "Ben"}},
        ]
    }
    events = await _run(fake_upstream, _request(_directive(directive), actions=[SAY_HELLO]))
    starts = [e for e in events if isinstance(e, ActionStart)]
    assert len(starts) == 2
    for start in starts:
        args = "".join(
            e.delta
            for e in events
            if isinstance(e, ActionArgs) and e.action_execution_id == start.action_execution_id
        )
        assert orjson.loads(args)["name"] in {"Ann", "Ben"}


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ({"status": 500, "message": "boom"}, "UPSTREAM_SERVER_ERROR"),
        ({"status": 429, "message": "slow down", "retry_after": 7}, "UPSTREAM_RATE_LIMITED"),
        ({"status": 400, "message": "bad"}, "UPSTREAM_CLIENT_ERROR"),
    ],
)
async def test_upstream_errors_end_the_turn_with_a_structured_error(
    fake_upstream, error: dict[str, Any], code: str
) -> None:
    events = await _run(fake_upstream, _request(_directive({"error": error})))
    run_error = events[-1]
    assert isinstance(run_error, RunError)
    assert run_error.code == code
    assert run_error.details["statusCode"] == error["status"]
    if "retry_after" in error:
        assert run_error.details["retryAfter"] == error["retry_after"]


async def test_a_stream_cut_off_midway_is_an_error_after_the_partial_text(fake_upstream) -> None:
    events = await _run(fake_upstream, _request(_directive({"tokens": 20, "fail_after_tokens": 5})))
    assert "".join(e.delta for e in events if isinstance(e, TextDelta)) == "t0 t1 t2 t3 t4"
    assert isinstance(events[-1], RunError)
    assert not any(isinstance(e, TextEnd) for e in events)


async def test_a_refused_connection_is_a_clear_error() -> None:
    adapter = OpenAIAdapter(
        api_key="test", base_url="http://127.0.0.1:9/v1", model="m", timeout=5, max_retries=0
    )
    turn = ChatTurn(request=_request("hi"), adapter=adapter, server_actions={}, max_iterations=2)
    events = [event async for event in chat_turn_events(turn)]
    assert isinstance(events[-1], RunError)
    assert events[-1].code == "UPSTREAM_UNREACHABLE"


async def test_forwarded_parameters_reach_the_model_request(fake_upstream) -> None:
    request = _request(
        "hello",
        actions=[SAY_HELLO],
        forwardedParameters={
            "model": "other-model",
            "maxTokens": 64,
            "stop": ["\n\n"],
            "temperature": 0.25,
            "toolChoice": "function",
            "toolChoiceFunctionName": "sayHello",
        },
    )
    await _run(fake_upstream, request)
    sent = fake_upstream.requests()[-1]
    assert sent["model"] == "other-model"
    assert sent["max_tokens"] == 64
    assert sent["stop"] == ["\n\n"]
    assert sent["temperature"] == 0.25
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "sayHello"}}


async def test_remote_actions_are_not_offered_and_disabled_ones_are_dropped(fake_upstream) -> None:
    request = _request(
        "hello",
        actions=[
            {**SAY_HELLO, "name": "remoteOne", "available": "remote"},
            {**SAY_HELLO, "name": "disabledOne", "available": "disabled"},
            SAY_HELLO,
        ],
    )
    assert [a.name for a in request.actions] == ["remoteOne", "sayHello"]
    await _run(fake_upstream, request)
    offered = [tool["function"]["name"] for tool in fake_upstream.requests()[-1]["tools"]]
    assert offered == ["sayHello"]
