"""The Anthropic adapter on the fake upstream's Messages API (proved faithful to the official
SDK in tests/benchmarks/test_fake_upstream_messages.py): the request it builds, the chunks it
reads back, and failures as the runtime's codes."""

from __future__ import annotations

from typing import Any

import pytest

from copilot_runtime.adapters.anthropic_adapter import AnthropicAdapter
from copilot_runtime.adapters.base import (
    FinishChunk,
    ModelRequest,
    TextChunk,
    ToolCallChunk,
    UpstreamError,
    UsageChunk,
)

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
    return [chunk async for chunk in adapter.stream(request)]


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
    assert sent["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
    }
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


async def test_a_stream_cut_short_is_a_stream_cut(fake_upstream: Any) -> None:
    fake_upstream.script({"text": "one two three four", "fail_after_tokens": 2})
    with pytest.raises(UpstreamError) as raised:
        await chunks_of(
            adapter_on(fake_upstream), ModelRequest(messages=[{"role": "user", "content": "Hi"}])
        )
    assert raised.value.code == "UPSTREAM_STREAM_CUT"
