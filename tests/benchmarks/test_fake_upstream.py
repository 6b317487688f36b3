"""The fake upstream, driven by the real `openai` client (and raw sockets for the wire details)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.error
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from benchmarks.fake_upstream import (
    DirectiveError,
    FakeUpstream,
    requests_remote,
    reset_remote,
    script_remote,
    stats_remote,
)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
USER_HELLO = [{"role": "user", "content": "Hello"}]


@pytest.fixture(scope="module")
def running_fake() -> Iterator[FakeUpstream]:
    with FakeUpstream() as fake:
        yield fake


@pytest.fixture
def fake(running_fake: FakeUpstream) -> FakeUpstream:
    running_fake.reset()
    return running_fake


@pytest.fixture
async def client(fake: FakeUpstream) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(api_key="test", base_url=fake.base_url, max_retries=0) as client:
        yield client


async def stream_chunks(
    client: AsyncOpenAI, messages: list[dict[str, Any]], **options: Any
) -> list[Any]:
    stream = await client.chat.completions.create(
        model="fake-model", messages=messages, stream=True, **options
    )
    return [chunk async for chunk in stream]


def streamed_text(chunks: list[Any]) -> str:
    return "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)


def assembled_tool_calls(chunks: list[Any]) -> dict[int, dict[str, Any]]:
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": "", "n": 0})
            call["id"] = delta.id or call["id"]
            if delta.function is not None:
                call["name"] += delta.function.name or ""
                call["arguments"] += delta.function.arguments or ""
            call["n"] += 1
    return calls


def wait_until(condition: Callable[[], bool], *, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


async def test_streamed_text_is_split_into_words_and_reassembles(
    fake: FakeUpstream, client: AsyncOpenAI
) -> None:
    fake.script({"text": "Hello world, how are you?"})

    chunks = await stream_chunks(client, USER_HELLO)

    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content for c in chunks[1:] if c.choices[0].delta.content]
    assert pieces == ["Hello", " world,", " how", " are", " you?"]
    assert streamed_text(chunks) == "Hello world, how are you?"
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert {chunk.model for chunk in chunks} == {"fake-model"}
    assert {chunk.object for chunk in chunks} == {"chat.completion.chunk"}
    # The server counts a reply once it has written it all; the client may have read it
    # first (seen once in CI), so the count is awaited before it is checked.
    await asyncio.to_thread(wait_until, lambda: fake.stats()["completed"] == 1)
    assert fake.stats()["completed"] == 1


async def test_tokens_directive_sends_that_many_numbered_tokens(
    fake: FakeUpstream, client: AsyncOpenAI
) -> None:
    fake.script({"tokens": 25})

    chunks = await stream_chunks(client, USER_HELLO)

    content_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content_chunks) == 25
    assert streamed_text(chunks) == " ".join(f"t{index}" for index in range(25))


async def test_parallel_tool_calls_stream_fragmented_arguments(
    fake: FakeUpstream, client: AsyncOpenAI
) -> None:
    weather = {"city": "Paris", "units": "metric", "days": [1, 2, 3]}
    fake.script(
        {
            "tool_calls": [
                {"name": "get_weather", "arguments": weather, "fragments": 4},
                {"name": "get_time", "arguments": {"zone": "CET"}, "id": "call_custom"},
            ]
        }
    )

    chunks = await stream_chunks(client, USER_HELLO)

    calls = assembled_tool_calls(chunks)
    assert sorted(calls) == [0, 1]
    assert calls[0]["name"] == "get_weather"
    assert json.loads(calls[0]["arguments"]) == weather
    assert calls[0]["n"] == 1 + 4  # the header chunk, then four argument pieces
    assert calls[1]["name"] == "get_time"
    assert calls[1]["id"] == "call_custom"
    assert json.loads(calls[1]["arguments"]) == {"zone": "CET"}
    assert calls[1]["n"] == 1 + 3  # default fragment count
    assert calls[0]["id"] != calls[1]["id"]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert streamed_text(chunks) == ""


async def test_raw_string_arguments_are_sent_verbatim(
    fake: FakeUpstream, client: AsyncOpenAI
) -> None:
    fake.script(
        {
            "tool_calls": [
                {"name": "empty", "arguments": ""},
                {"name": "broken", "arguments": '{"a":'},
            ]
        }
    )

    calls = assembled_tool_calls(await stream_chunks(client, USER_HELLO))

    assert calls[0]["arguments"] == ""
    assert calls[1]["arguments"] == '{"a":'


async def test_usage_chunk_is_sent_only_when_requested(
    fake: FakeUpstream, client: AsyncOpenAI
) -> None:
    messages = [
        {"role": "system", "content": "Be brief please"},
        {"role": "user", "content": "Two words"},
    ]
    fake.script({"tokens": 4}, {"tokens": 4})

    with_usage = await stream_chunks(client, messages, stream_options={"include_usage": True})
    without_usage = await stream_chunks(client, messages)

    last = with_usage[-1]
    assert last.choices == []
    assert last.usage.prompt_tokens == 5
    assert last.usage.completion_tokens == 4
    assert last.usage.total_tokens == 9
    assert last.usage.prompt_tokens_details.cached_tokens == 0
    assert last.usage.completion_tokens_details.reasoning_tokens == 0
    assert all(chunk.usage is None for chunk in without_usage)


async def test_usage_override_is_merged(fake: FakeUpstream, client: AsyncOpenAI) -> None:
    fake.script({"tokens": 2, "usage": {"prompt_tokens": 100}})

    chunks = await stream_chunks(client, USER_HELLO, stream_options={"include_usage": True})

    assert chunks[-1].usage.prompt_tokens == 100
    assert chunks[-1].usage.total_tokens == 102


async def test_scripted_500_raises_internal_server_error(
    fake: FakeUpstream, client: AsyncOpenAI
) -> None:
    fake.script({"error": {"status": 500, "message": "upstream exploded"}})

    with pytest.raises(openai.InternalServerError) as raised:
        await stream_chunks(client, USER_HELLO)

    assert raised.value.status_code == 500
    assert "upstream exploded" in raised.value.message
    await asyncio.to_thread(wait_until, lambda: fake.stats()["errors"] == 1)
    assert fake.stats()["errors"] == 1


async def test_scripted_429_carries_retry_after(fake: FakeUpstream, client: AsyncOpenAI) -> None:
    fake.script({"error": {"status": 429, "message": "slow down", "retry_after": 7}})

    with pytest.raises(openai.RateLimitError) as raised:
        await client.chat.completions.create(model="m", messages=USER_HELLO)

    assert raised.value.response.headers["retry-after"] == "7"
    assert raised.value.code == "rate_limit_exceeded"


async def test_steps_follow_the_assistant_messages_after_the_last_user_message(
    fake: FakeUpstream, client: AsyncOpenAI
) -> None:
    directive = json.dumps(
        {
            "steps": [
                {"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}, "id": "call_1"}]},
                {"text": "Done looking."},
            ]
        }
    )
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Earlier question"},
        {"role": "assistant", "content": "Earlier answer"},
        {"role": "user", "content": f"Look it up\nFAKE: {directive}"},
    ]
    tool_round = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"q":"x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "found"},
    ]

    first = await stream_chunks(client, history)
    second = await stream_chunks(client, history + tool_round)
    past_the_end = await stream_chunks(client, history + tool_round + tool_round)

    assert assembled_tool_calls(first)[0]["name"] == "lookup"
    assert streamed_text(second) == "Done looking."
    assert streamed_text(past_the_end) == "Tool result: found"


async def test_repeat_last_reuses_the_last_step(fake: FakeUpstream, client: AsyncOpenAI) -> None:
    fake.script({"steps": [{"text": "one"}, {"text": "again"}], "repeat_last": True})
    messages = USER_HELLO + [{"role": "assistant", "content": "a"}] * 5

    assert streamed_text(await stream_chunks(client, messages)) == "again"


async def test_queued_directive_wins_over_inline_one(
    fake: FakeUpstream, client: AsyncOpenAI
) -> None:
    inline = [{"role": "user", "content": 'FAKE: {"text": "inline"}'}]
    fake.script({"text": "queued"})

    assert streamed_text(await stream_chunks(client, inline)) == "queued"
    assert streamed_text(await stream_chunks(client, inline)) == "inline"


async def test_inline_directive_is_found_in_content_parts(
    fake: FakeUpstream, client: AsyncOpenAI
) -> None:
    content = [
        {"type": "text", "text": "Please answer"},
        {"type": "text", "text": 'FAKE: {"text": "from parts"}'},
    ]

    chunks = await stream_chunks(client, [{"role": "user", "content": content}])

    assert streamed_text(chunks) == "from parts"


async def test_default_reply_echoes_the_user(fake: FakeUpstream, client: AsyncOpenAI) -> None:
    messages = [
        {"role": "user", "content": "First"},
        {"role": "assistant", "content": "Reply"},
        {"role": "user", "content": "What time is it?"},
    ]

    assert streamed_text(await stream_chunks(client, messages)) == "You said: What time is it?"


async def test_invalid_inline_directive_is_a_400(fake: FakeUpstream, client: AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="unknown field"):
        await stream_chunks(client, [{"role": "user", "content": 'FAKE: {"txt": "typo"}'}])


def test_invalid_directives_are_rejected_when_queued(fake: FakeUpstream) -> None:
    with pytest.raises(DirectiveError, match="unknown field"):
        fake.script({"text": "ok", "bogus": 1})
    with pytest.raises(urllib.error.HTTPError) as raised:
        script_remote(fake.base_url, {"tokens": -1})
    assert raised.value.code == 400
    assert fake.stats()["queued"] == 0


async def test_hang_counts_client_close(fake: FakeUpstream, client: AsyncOpenAI) -> None:
    fake.script({"hang": True})

    stream = await client.chat.completions.create(model="m", messages=USER_HELLO, stream=True)
    assert stream.response.status_code == 200
    wait_until(lambda: fake.stats()["active"] == 1)
    await stream.close()

    await asyncio.to_thread(wait_until, lambda: fake.stats()["client_closed"] == 1)
    assert fake.stats()["active"] == 0
    assert fake.stats()["completed"] == 0


async def test_client_closing_mid_stream_is_counted(
    fake: FakeUpstream, client: AsyncOpenAI
) -> None:
    fake.script({"tokens": 100, "delay_ms": 20})

    stream = await client.chat.completions.create(model="m", messages=USER_HELLO, stream=True)
    received = []
    async for chunk in stream:
        received.append(chunk)
        if len(received) == 3:
            break
    await stream.close()

    await asyncio.to_thread(wait_until, lambda: fake.stats()["client_closed"] == 1)
    assert len(received) == 3
    assert fake.stats()["completed"] == 0


async def test_hang_before_headers_times_out_the_client(fake: FakeUpstream) -> None:
    fake.script({"hang_before_headers": True})

    async with AsyncOpenAI(
        api_key="test", base_url=fake.base_url, max_retries=0, timeout=0.3
    ) as impatient:
        with pytest.raises(openai.APITimeoutError):
            await impatient.chat.completions.create(model="m", messages=USER_HELLO, stream=True)

    await asyncio.to_thread(wait_until, lambda: fake.stats()["client_closed"] == 1)


async def test_fail_after_tokens_cuts_the_stream(fake: FakeUpstream, client: AsyncOpenAI) -> None:
    fake.script({"fail_after_tokens": 3})
    received: list[str] = []

    stream = await client.chat.completions.create(model="m", messages=USER_HELLO, stream=True)
    with pytest.raises(openai.APIConnectionError):
        async for chunk in stream:
            received.append(chunk.choices[0].delta.content or "")

    assert "".join(received) == "t0 t1 t2"
    assert fake.stats()["cut_off"] == 1
    assert fake.stats()["completed"] == 0


async def test_token_delay_spaces_the_tokens(fake: FakeUpstream, client: AsyncOpenAI) -> None:
    fake.script({"tokens": 5, "delay_ms": 20})

    started = time.monotonic()
    chunks = await stream_chunks(client, USER_HELLO)

    assert time.monotonic() - started >= 5 * 0.02
    assert streamed_text(chunks) == "t0 t1 t2 t3 t4"


async def test_requests_are_recorded_newest_last(fake: FakeUpstream, client: AsyncOpenAI) -> None:
    await client.chat.completions.create(model="first", messages=USER_HELLO, temperature=0.25)
    await stream_chunks(client, USER_HELLO, temperature=0.75)

    recorded = fake.requests()
    assert [body["temperature"] for body in recorded] == [0.25, 0.75]
    assert recorded[0]["model"] == "first"
    assert recorded[0]["messages"] == USER_HELLO
    assert recorded[1]["stream"] is True
    assert requests_remote(fake.base_url) == recorded


async def test_non_streaming_completion(fake: FakeUpstream, client: AsyncOpenAI) -> None:
    fake.script(
        {"text": "Whole answer"},
        {"tool_calls": [{"name": "act", "arguments": {"n": 1}}]},
    )

    text = await client.chat.completions.create(model="m", messages=USER_HELLO)
    tools = await client.chat.completions.create(model="m", messages=USER_HELLO)

    assert text.object == "chat.completion"
    assert text.choices[0].message.content == "Whole answer"
    assert text.choices[0].finish_reason == "stop"
    assert text.usage is not None
    assert (text.usage.prompt_tokens, text.usage.completion_tokens) == (1, 2)
    assert tools.choices[0].finish_reason == "tool_calls"
    tool_call = tools.choices[0].message.tool_calls[0]
    assert (tool_call.function.name, json.loads(tool_call.function.arguments)) == ("act", {"n": 1})


async def test_many_concurrent_streams(fake: FakeUpstream, client: AsyncOpenAI) -> None:
    messages = [[{"role": "user", "content": f'FAKE: {{"tokens": {n}}}'}] for n in range(1, 51)]

    results = await asyncio.gather(*(stream_chunks(client, m) for m in messages))

    for count, chunks in enumerate(results, start=1):
        assert streamed_text(chunks).split() == [f"t{index}" for index in range(count)]
    await asyncio.to_thread(wait_until, lambda: fake.stats()["completed"] == 50)
    assert fake.stats()["completed"] == 50


async def test_keep_alive_and_exact_sse_framing(fake: FakeUpstream) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", fake.port)
    body = json.dumps({"model": "m", "stream": True, "messages": USER_HELLO}).encode()
    request = (
        b"POST /chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%b" % (len(body), body)
    )
    try:
        for _ in range(2):  # the same connection serves both
            fake.script({"text": "Hi there"})
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"transfer-encoding: chunked" in head
            assert b"content-type: text/event-stream" in head
            events = await read_chunked_events(reader)
            assert events[-1] == b"data: [DONE]"
            contents = [
                json.loads(e[6:])["choices"][0]["delta"].get("content") for e in events[:-1]
            ]
            assert contents == ["", "Hi", " there", None]
    finally:
        writer.close()
        await writer.wait_closed()


async def read_chunked_events(reader: asyncio.StreamReader) -> list[bytes]:
    payload = b""
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        data = await reader.readexactly(size + 2)
        if size == 0:
            break
        payload += data[:-2]
    assert payload.endswith(b"\n\n")
    return payload[:-2].split(b"\n\n")


def test_control_endpoints_over_http(fake: FakeUpstream) -> None:
    assert script_remote(fake.base_url, {"text": "a"}, {"text": "b"}) == 2
    assert stats_remote(fake.root_url)["queued"] == 2
    reset_remote(fake.base_url)
    assert stats_remote(fake.base_url) == {
        "requests": 0,
        "completed": 0,
        "errors": 0,
        "cut_off": 0,
        "client_closed": 0,
        "active": 0,
        "queued": 0,
    }


def test_subprocess_mode() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.fake_upstream", "--host", "127.0.0.1", "--port", "0"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("FAKE_UPSTREAM_PORT=")
        base_url = f"http://127.0.0.1:{int(line.split('=', 1)[1])}/v1"
        script_remote(base_url, {"text": "from a subprocess"})

        reply = openai.OpenAI(
            api_key="test", base_url=base_url, max_retries=0
        ).chat.completions.create(model="m", messages=USER_HELLO)

        assert reply.choices[0].message.content == "from a subprocess"
        assert stats_remote(base_url)["completed"] == 1
        assert requests_remote(base_url)[0]["messages"] == USER_HELLO
    finally:
        process.terminate()
        remaining_output, _ = process.communicate(timeout=10)
    assert process.returncode == 0
    assert remaining_output == ""
