"""The Anthropic adapter on the fake upstream's Messages API (proved faithful to the official
SDK in tests/benchmarks/test_fake_upstream_messages.py): the request it builds, the chunks it
reads back, and failures as the runtime's codes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.test import AsyncClient, override_settings

from conversations.models import Run, RunStatus
from copilot_runtime.adapters import adapter_from_settings
from copilot_runtime.adapters.anthropic_adapter import AnthropicAdapter, _StreamReader
from copilot_runtime.adapters.base import (
    FinishChunk,
    ModelRequest,
    TextChunk,
    ToolCallChunk,
    UpstreamError,
    UsageChunk,
)
from tests.copilot_runtime.agui.helpers import post, read_events, run_body, types, user

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def adapter_on(fake_upstream: Any) -> AnthropicAdapter:
    return AnthropicAdapter(
        api_key="sk-ant-test",
        base_url=fake_upstream.base_url.removesuffix("/v1"),
        model="claude-test",
        timeout=5,
        max_retries=0,
        max_tokens=256,
    )


async def chunks_of(adapter: AnthropicAdapter, request: ModelRequest) -> list[Any]:
    try:
        return [chunk async for chunk in adapter.stream(request)]
    finally:
        await adapter.aclose()


def hi() -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": "Hi"}])


def calls_in(chunks: list[Any]) -> list[tuple[str | None, str | None, str]]:
    calls: dict[int, list[Any]] = {}
    for chunk in chunks:
        if isinstance(chunk, ToolCallChunk):
            entry = calls.setdefault(chunk.index, [None, None, ""])
            entry[0] = entry[0] or chunk.id
            entry[1] = entry[1] or chunk.name
            entry[2] += chunk.arguments_delta
    return [tuple(entry) for entry in calls.values()]


async def test_text_usage_with_cache_tokens_and_the_stop_reason(fake_upstream: Any) -> None:
    fake_upstream.script(
        {
            "text": "Hello from Claude",
            "usage": {"cache_read_input_tokens": 10, "cache_creation_input_tokens": 5},
        }
    )
    chunks = await chunks_of(
        adapter_on(fake_upstream),
        ModelRequest(
            messages=[{"role": "system", "content": "Brief."}, {"role": "user", "content": "Hi"}]
        ),
    )

    assert "".join(c.delta for c in chunks if isinstance(c, TextChunk)) == "Hello from Claude"
    assert [c.reason for c in chunks if isinstance(c, FinishChunk)] == ["stop"]
    [usage] = [c for c in chunks if isinstance(c, UsageChunk)]
    # Input counts the cache reads and writes (2 words + 10 + 5), output the 3 tokens.
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (17, 10, 3)
    assert usage.cache_write_input_tokens == 5
    sent = fake_upstream.requests()[-1]
    assert sent["system"] == "Brief."
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    assert (sent["model"], sent["max_tokens"], sent["stream"]) == ("claude-test", 256, True)


async def test_parallel_tool_calls_stream_their_input_fragments(fake_upstream: Any) -> None:
    fake_upstream.script(
        {
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "toolu_1"},
                {"name": "get_weather", "arguments": {"city": "Rome"}, "id": "toolu_2"},
            ]
        }
    )
    chunks = await chunks_of(
        adapter_on(fake_upstream),
        ModelRequest(
            messages=[{"role": "user", "content": "Weather?"}],
            tools=[WEATHER],
            tool_choice="required",
            parallel_tool_calls=False,
        ),
    )

    assert calls_in(chunks) == [
        ("toolu_1", "get_weather", '{"city":"Paris"}'),
        ("toolu_2", "get_weather", '{"city":"Rome"}'),
    ]
    assert [c.reason for c in chunks if isinstance(c, FinishChunk)] == ["tool_calls"]
    sent = fake_upstream.requests()[-1]
    assert sent["tools"] == [
        {
            "name": "get_weather",
            "description": "The weather in a city.",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    ]
    assert sent["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}


async def test_the_history_becomes_alternating_messages_with_tool_blocks(
    fake_upstream: Any,
) -> None:
    history = [
        {"role": "system", "content": "Rules."},
        {"role": "developer", "content": "More rules."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            ],
        },
        {
            "role": "assistant",
            "content": "Checking",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "broken"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "Rainy"},
    ]
    await chunks_of(adapter_on(fake_upstream), ModelRequest(messages=history, tools=[WEATHER]))

    sent = fake_upstream.requests()[-1]
    assert sent["system"] == "Rules.\n\nMore rules."
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][0]["content"][1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
    ]
    assert sent["messages"][1]["content"] == [
        {"type": "text", "text": "Checking"},
        {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "c2", "name": "get_weather", "input": {}},
    ]
    # Both results in ONE user message, as the API requires.
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "Sunny"},
        {"type": "tool_result", "tool_use_id": "c2", "content": "Rainy"},
    ]


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ({"status": 429, "message": "slow down", "retry_after": 3}, "UPSTREAM_RATE_LIMITED"),
        ({"status": 500, "message": "boom"}, "UPSTREAM_SERVER_ERROR"),
        ({"status": 401, "message": "bad key"}, "UPSTREAM_CLIENT_ERROR"),
    ],
)
async def test_failures_become_the_runtimes_codes(
    fake_upstream: Any, error: dict, code: str
) -> None:
    fake_upstream.script({"error": error})
    with pytest.raises(UpstreamError) as raised:
        await chunks_of(
            adapter_on(fake_upstream), ModelRequest(messages=[{"role": "user", "content": "Hi"}])
        )
    assert raised.value.code == code
    assert raised.value.status_code == error["status"]
    assert error["message"] in raised.value.message
    assert raised.value.retry_after == error.get("retry_after")


async def test_a_stream_cut_short_is_a_stream_cut(fake_upstream: Any) -> None:
    fake_upstream.script({"text": "one two three four", "fail_after_tokens": 2})
    with pytest.raises(UpstreamError) as raised:
        await chunks_of(
            adapter_on(fake_upstream), ModelRequest(messages=[{"role": "user", "content": "Hi"}])
        )
    assert raised.value.code == "UPSTREAM_STREAM_CUT"


@pytest.mark.parametrize(
    ("tool_choice", "parallel", "sent"),
    [
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            None,
            {"type": "tool", "name": "get_weather"},
        ),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("none", False, {"type": "none", "disable_parallel_tool_use": True}),
        (None, None, None),
        (None, True, None),
    ],
)
async def test_tool_choice_in_anthropics_words(
    fake_upstream: Any, tool_choice: Any, parallel: bool | None, sent: dict | None
) -> None:
    request = ModelRequest(
        messages=[{"role": "user", "content": "Hi"}],
        tools=[WEATHER],
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
    )
    await chunks_of(adapter_on(fake_upstream), request)
    assert fake_upstream.requests()[-1].get("tool_choice") == sent


async def test_request_parameters_override_the_adapters(fake_upstream: Any) -> None:
    request = ModelRequest(
        messages=[{"role": "user", "content": "Hi"}],
        model="claude-other",
        max_tokens=64,
        stop=["###"],
        temperature=0.25,
    )
    await chunks_of(adapter_on(fake_upstream), request)
    sent = fake_upstream.requests()[-1]
    assert (sent["model"], sent["max_tokens"]) == ("claude-other", 64)
    assert (sent["stop_sequences"], sent["temperature"]) == (["###"], 0.25)
    assert "system" not in sent and "tools" not in sent and "tool_choice" not in sent


async def test_consecutive_turns_of_one_role_are_merged(fake_upstream: Any) -> None:
    history = [
        {"role": "user", "content": "first"},
        {"role": "user", "content": [{"type": "text", "text": "second"}]},
        {"role": "assistant", "content": "answer one"},
        {"role": "assistant", "content": [{"type": "text", "text": "answer two"}]},
        {"role": "system", "content": "Late rule."},
        {"role": "user", "content": "third"},
    ]
    await chunks_of(adapter_on(fake_upstream), ModelRequest(messages=history))
    sent = fake_upstream.requests()[-1]
    assert sent["system"] == "Late rule."
    assert sent["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "answer one"},
                {"type": "text", "text": "answer two"},
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "third"}]},
    ]


@pytest.mark.parametrize(
    ("directive", "request_", "reason"),
    [
        ({"text": "done"}, hi(), "stop"),
        ({"tool_calls": [{"name": "get_weather", "arguments": {}}]}, hi(), "tool_calls"),
        (
            {"text": "one two three"},
            ModelRequest(messages=[{"role": "user", "content": "Hi"}], max_tokens=1),
            "length",
        ),
        (
            {"text": "one STOP two"},
            ModelRequest(messages=[{"role": "user", "content": "Hi"}], stop=["STOP"]),
            "stop",
        ),
    ],
)
async def test_each_stop_reason_in_openais_words(
    fake_upstream: Any, directive: dict, request_: ModelRequest, reason: str
) -> None:
    fake_upstream.script(directive)
    chunks = await chunks_of(adapter_on(fake_upstream), request_)
    assert [c.reason for c in chunks if isinstance(c, FinishChunk)] == [reason]
    assert isinstance(chunks[-1], UsageChunk)


async def test_the_environment_gives_the_url_and_key(
    fake_upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_upstream.base_url.removesuffix("/v1") + "/")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    adapter = AnthropicAdapter(
        api_key="", base_url=None, model="claude-test", timeout=5, max_retries=0, version="2099"
    )
    fake_upstream.script({"text": "via env"})
    chunks = await chunks_of(adapter, hi())
    assert "".join(c.delta for c in chunks if isinstance(c, TextChunk)) == "via env"
    assert adapter._url == fake_upstream.base_url + "/messages"
    assert adapter._transport._headers["x-api-key"] == "sk-from-env"
    assert adapter._transport._headers["anthropic-version"] == "2099"
    assert adapter._transport._headers["Accept"] == "text/event-stream"


def test_a_mid_stream_error_event_is_an_upstream_error() -> None:
    reader = _StreamReader()
    with pytest.raises(UpstreamError) as raised:
        reader.feed(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        )
    assert raised.value.code == "UPSTREAM_ERROR"
    assert "Overloaded" in raised.value.message


def test_tool_call_indexes_count_tool_blocks_only() -> None:
    reader = _StreamReader()
    text_block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    assert reader.feed(text_block) == []
    tool = {"type": "tool_use", "id": "t9", "name": "f", "input": {}}
    started = reader.feed({"type": "content_block_start", "index": 1, "content_block": tool})
    fragment = reader.feed(
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"a"'},
        }
    )
    assert started == [ToolCallChunk(index=0, id="t9", name="f", arguments_delta="")]
    assert fragment == [ToolCallChunk(index=0, id=None, name=None, arguments_delta='{"a"')]


async def run_ended(run_id: str) -> Run:
    for _ in range(200):
        found = await Run.objects.aget(pk=run_id)
        if found.is_finished:
            return found
        await asyncio.sleep(0.025)
    raise AssertionError(f"run {run_id} did not end")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("_close_run_thread_connections")
async def test_a_v2_run_on_the_anthropic_adapter_set_by_settings(fake_upstream: Any) -> None:
    root = fake_upstream.base_url.removesuffix("/v1")
    conf = {"ADAPTER": {"kind": "anthropic", "api_key": "test", "base_url": root, "max_retries": 0}}
    cache = {"cache_read_input_tokens": 6, "cache_creation_input_tokens": 2}
    fake_upstream.script({"text": "Hello from Claude", "usage": cache})
    body = run_body("anthropic-e2e", [user("u1", "Hi there")])
    with override_settings(COPILOT_RUNTIME=conf):
        response = await post(AsyncClient(), "/agent/default/run", body)
        assert response.status_code == 200, response.content
        events = await read_events(response)
        stored = await run_ended(body["runId"])
        # The runtime keeps one adapter per event loop; close its connection pool with the
        # test's loop.
        adapter = adapter_from_settings()
        assert isinstance(adapter, AnthropicAdapter)
        await adapter.aclose()

    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        # The fake's unpaced text came in one read: its first word alone, then the rest.
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == (
        "Hello from Claude"
    )
    [usage] = events[-1]["usage"]
    assert usage["provider"] == "anthropic.messages"
    assert usage["model"] == stored.model == "claude-sonnet-4-5"
    # 0.0.59 defines no cache writes (1.0's cacheWriteInputTokens: tests/e2e/test_agui10_client).
    assert "cacheWriteInputTokens" not in usage
    assert (usage["inputTokens"], usage["cachedInputTokens"], usage["outputTokens"]) == (
        stored.input_tokens,
        6,
        3,
    )
    assert stored.status == RunStatus.SUCCEEDED
    assert stored.output_tokens == 3
    # The prompt's words plus the cached reads and writes, as AG-UI counts them.
    sent = fake_upstream.requests()[-1]
    words = sum(len(str(b.get("text", "")).split()) for m in sent["messages"] for b in m["content"])
    words += len(str(sent.get("system", "")).split())
    assert stored.input_tokens == words + 6 + 2
    assert sent["messages"][-1] == {
        "role": "user",
        "content": [{"type": "text", "text": "Hi there"}],
    }
