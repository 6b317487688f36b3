"""The fake upstream's ``reasoning`` directive: on the chat completions stream, read by the real
``openai`` client (which keeps fields it does not know in each delta's ``model_extra``), and as
extended thinking on the Messages API, read by the ``anthropic`` SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import pytest
from openai import AsyncOpenAI

from benchmarks.fake_upstream import DirectiveError, FakeUpstream
from benchmarks.fake_upstream.thinking import signature_of


@pytest.fixture(scope="module")
def running_fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as fake:
        yield fake


@pytest.fixture
async def client(running_fake: FakeUpstream) -> AsyncIterator[AsyncOpenAI]:
    running_fake.reset()
    async with AsyncOpenAI(api_key="t", base_url=running_fake.base_url, max_retries=0) as client:
        yield client


async def _deltas(client: AsyncOpenAI, directive: dict[str, Any]) -> list[dict[str, Any]]:
    stream = await client.chat.completions.create(
        model="fake-model",
        messages=[{"role": "user", "content": "FAKE: " + json.dumps(directive)}],
        stream=True,
    )
    return [chunk.choices[0].delta.model_dump() async for chunk in stream if chunk.choices]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_come_word_by_word_before_the_text(
    client: AsyncOpenAI, field: str
) -> None:
    deltas = await _deltas(
        client, {"reasoning": "Two plus two.", "reasoning_field": field, "text": "Four"}
    )
    kinds = ["reasoning" if d.get(field) else "text" if d.get("content") else "" for d in deltas]
    kinds = [kind for kind in kinds if kind]
    assert kinds == ["reasoning", "reasoning", "reasoning", "text"]
    assert "".join(d[field] for d in deltas if d.get(field)) == "Two plus two."
    other = "reasoning" if field == "reasoning_content" else "reasoning_content"
    assert not any(d.get(other) for d in deltas)


async def test_without_reasoning_no_reasoning_field_is_sent(client: AsyncOpenAI) -> None:
    deltas = await _deltas(client, {"text": "Four"})
    assert not any(d.get("reasoning_content") or d.get("reasoning") for d in deltas)


def test_an_unknown_reasoning_field_is_rejected(running_fake: FakeUpstream) -> None:
    with pytest.raises(DirectiveError, match="reasoning_field must be one of"):
        running_fake.script({"reasoning": "x", "reasoning_field": "thoughts"})
    with pytest.raises(DirectiveError, match="reasoning must be a str"):
        running_fake.script({"reasoning": 3})


# --- the Messages API: extended thinking, read by the official ``anthropic`` SDK -------------


def _anthropic(fake: FakeUpstream) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        api_key="t", base_url=fake.base_url.removesuffix("/v1"), max_retries=0
    )


THINKING_ON = {"type": "enabled", "budget_tokens": 1024}


async def test_a_thinking_request_gets_a_signed_thinking_block_then_a_redacted_one(
    running_fake: FakeUpstream,
) -> None:
    running_fake.reset()
    running_fake.script({"reasoning": "Greet back.", "redacted_thinking": "ENC", "text": "Hi"})
    async with _anthropic(running_fake).messages.stream(
        model="claude-test",
        max_tokens=2048,
        thinking=THINKING_ON,
        messages=[{"role": "user", "content": "Hello"}],
    ) as stream:
        final = await stream.get_final_message()

    thinking, redacted, text = final.content
    assert (thinking.type, thinking.thinking) == ("thinking", "Greet back.")
    assert thinking.signature == signature_of("Greet back.")
    assert (redacted.type, redacted.data) == ("redacted_thinking", "ENC")
    assert (text.type, text.text) == ("text", "Hi")


async def test_without_thinking_enabled_no_thinking_block_is_sent(
    running_fake: FakeUpstream,
) -> None:
    running_fake.reset()
    running_fake.script({"reasoning": "Greet back.", "text": "Hi"})
    async with _anthropic(running_fake).messages.stream(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "Hello"}]
    ) as stream:
        final = await stream.get_final_message()
    assert [block.type for block in final.content] == ["text"]


async def test_a_thinking_block_sent_back_changed_is_refused(running_fake: FakeUpstream) -> None:
    running_fake.reset()
    changed = {"type": "thinking", "thinking": "Other.", "signature": signature_of("Greet.")}
    history = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": [changed, {"type": "text", "text": "Hi"}]},
        {"role": "user", "content": "Again"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
        await _anthropic(running_fake).messages.create(
            model="claude-test", max_tokens=2048, thinking=THINKING_ON, messages=history
        )
    kept = {**changed, "thinking": "Greet."}
    history[1]["content"][0] = kept
    reply = await _anthropic(running_fake).messages.create(
        model="claude-test", max_tokens=2048, thinking=THINKING_ON, messages=history
    )
    assert reply.content[-1].type == "text"
