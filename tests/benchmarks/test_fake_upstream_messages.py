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


async def test_the_stream_events_come_in_anthropics_order(fake: FakeUpstream) -> None:
    fake.script(
        {
            "text": "Hi",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "t1"}],
        }
    )
    async with client(fake).messages.stream(
        model="claude-test",
        max_tokens=100,
        tools=[WEATHER],
        messages=[{"role": "user", "content": "Go"}],
    ) as stream:
        events = [event async for event in stream]

    raw = [e for e in events if e.type not in ("text", "input_json")]
    assert [e.type for e in raw] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        *["content_block_delta"] * 3,  # the input in 3 fragments (the default)
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = raw[0].message
    assert (start.role, start.content, start.usage.output_tokens) == ("assistant", [], 0)
    assert start.id and start.model == "claude-test"
    tool_start = raw[4].content_block
    assert (tool_start.type, tool_start.id, tool_start.name, tool_start.input) == (
        "tool_use",
        "t1",
        "get_weather",
        {},
    )
    fragments = [e.delta.partial_json for e in raw[5:8]]
    assert "".join(fragments) == '{"city":"Oslo"}' and all(fragments)
    # 1 text token + the tool_use start + 3 fragments.
    assert raw[-2].usage.output_tokens == 5


async def test_usage_carries_cache_reads_and_writes(fake: FakeUpstream) -> None:
    fake.script(
        {"text": "ok", "usage": {"cache_read_input_tokens": 7, "cache_creation_input_tokens": 9}}
    )
    reply = await client(fake).messages.create(
        model="claude-test",
        max_tokens=10,
        system=[{"type": "text", "text": "Three word system"}],
        messages=[{"role": "user", "content": "one two"}],
    )
    usage = reply.usage
    assert (usage.input_tokens, usage.output_tokens) == (5, 1)
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (7, 9)


async def test_max_tokens_cuts_the_reply(fake: FakeUpstream) -> None:
    fake.script({"text": "one two three four five"})
    async with client(fake).messages.stream(
        model="claude-test", max_tokens=2, messages=[{"role": "user", "content": "Count"}]
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "max_tokens"
    assert [block.text for block in final.content] == ["one two"]
    assert final.usage.output_tokens == 2


async def test_a_stop_sequence_ends_the_reply_before_it(fake: FakeUpstream) -> None:
    fake.script({"text": "alpha beta END gamma"})
    reply = await client(fake).messages.create(
        model="claude-test",
        max_tokens=50,
        stop_sequences=["END"],
        messages=[{"role": "user", "content": "Go"}],
    )
    assert (reply.stop_reason, reply.stop_sequence) == ("stop_sequence", "END")
    assert [block.text for block in reply.content] == ["alpha beta "]


async def test_the_inline_directive_and_the_default_reply(fake: FakeUpstream) -> None:
    text_turn = await client(fake).messages.create(
        model="claude-test",
        max_tokens=50,
        messages=[{"role": "user", "content": 'Hello\nFAKE: {"text": "Scripted inline"}'}],
    )
    echoed = await client(fake).messages.create(
        model="claude-test",
        max_tokens=50,
        messages=[{"role": "user", "content": [{"type": "text", "text": "plain words"}]}],
    )
    assert [b.text for b in text_turn.content] == ["Scripted inline"]
    assert [b.text for b in echoed.content] == ["You said: plain words"]
    assert len(fake.requests()) == 2


async def test_a_tool_result_without_a_directive_is_echoed(fake: FakeUpstream) -> None:
    reply = await client(fake).messages.create(
        model="claude-test",
        max_tokens=50,
        tools=[WEATHER],
        messages=[
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "21C"}],
            },
        ],
    )
    assert [b.text for b in reply.content] == ["Tool result: 21C"]


async def test_an_unreadable_request_is_anthropics_bad_request(fake: FakeUpstream) -> None:
    with pytest.raises(anthropic.BadRequestError) as raised:
        await client(fake).messages.create(
            model="claude-test",
            max_tokens=10,
            messages=[{"role": "user", "content": 'FAKE: {"nope": 1}'}],
        )
    assert raised.value.status_code == 400
    assert raised.value.body["type"] == "error"
    assert raised.value.body["error"]["type"] == "invalid_request_error"


async def test_a_rate_limit_carries_retry_after(fake: FakeUpstream) -> None:
    fake.script({"error": {"status": 429, "message": "slow", "retry_after": 2}})
    with pytest.raises(anthropic.RateLimitError) as raised:
        await client(fake).messages.create(
            model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "Hi"}]
        )
    assert raised.value.response.headers["retry-after"] == "2"
    assert raised.value.body["error"] == {"type": "rate_limit_error", "message": "slow"}
