"""The fake upstream speaks Anthropic's Messages API faithfully: the official ``anthropic`` SDK
streams and parses what it sends (text, parallel tool calls with their input in fragments,
usage with cache tokens, stop reasons) and turns its error statuses into its own exceptions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from benchmarks.fake_upstream import FakeUpstream


@pytest.fixture
def fake() -> Iterator[FakeUpstream]:
    with FakeUpstream(token_delay_ms=0) as upstream:
        yield upstream


def client(fake: FakeUpstream) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="test", base_url=fake.base_url.removesuffix("/v1"), max_retries=0
    )


WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


async def test_a_streamed_text_reply_parses_with_the_sdk(fake: FakeUpstream) -> None:
    fake.script({"text": "Hello from Claude", "usage": {"cache_read_input_tokens": 4}})
    async with client(fake).messages.stream(
        model="claude-test",
        max_tokens=100,
        system="Be brief.",
        messages=[{"role": "user", "content": "Hi there"}],
    ) as stream:
        texts = [text async for text in stream.text_stream]
        final = await stream.get_final_message()

    assert "".join(texts) == "Hello from Claude"
    assert final.stop_reason == "end_turn"
    assert final.model == "claude-test"
    assert final.usage.output_tokens == 3
    assert final.usage.input_tokens == 4  # "Be brief." and "Hi there"
    assert final.usage.cache_read_input_tokens == 4
    body = fake.requests()[-1]
    assert body["system"] == "Be brief." and body["stream"] is True


async def test_parallel_tool_calls_arrive_as_tool_use_blocks(fake: FakeUpstream) -> None:
    fake.script(
        {
            "text": "Looking",
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "toolu_1"},
                {"name": "get_weather", "arguments": {"city": "Rome"}, "id": "toolu_2"},
            ],
        }
    )
    async with client(fake).messages.stream(
        model="claude-test",
        max_tokens=100,
        tools=[WEATHER],
        messages=[{"role": "user", "content": "Weather?"}],
    ) as stream:
        final = await stream.get_final_message()

    assert final.stop_reason == "tool_use"
    kinds = [block.type for block in final.content]
    assert kinds == ["text", "tool_use", "tool_use"]
    calls = [(b.id, b.name, b.input) for b in final.content if b.type == "tool_use"]
    assert calls == [
        ("toolu_1", "get_weather", {"city": "Paris"}),
        ("toolu_2", "get_weather", {"city": "Rome"}),
    ]


async def test_a_tool_result_turn_gets_the_next_step(fake: FakeUpstream) -> None:
    directive = (
        '{"steps": [{"tool_calls": [{"name": "get_weather", "arguments": {}}]}, {"text": "Sunny"}]}'
    )
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"FAKE: {directive}"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "21C"}],
        },
    ]
    reply = await client(fake).messages.create(
        model="claude-test", max_tokens=50, tools=[WEATHER], messages=messages
    )
    assert [block.text for block in reply.content] == ["Sunny"]
    assert reply.stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("status", "exception"),
    [(429, anthropic.RateLimitError), (500, anthropic.InternalServerError)],
)
async def test_error_statuses_become_the_sdks_exceptions(
    fake: FakeUpstream, status: int, exception: type[Exception]
) -> None:
    fake.script({"error": {"status": status, "message": "nope"}})
    with pytest.raises(exception, match="nope"):
        await client(fake).messages.create(
            model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "Hi"}]
        )
