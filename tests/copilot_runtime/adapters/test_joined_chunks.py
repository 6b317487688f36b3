"""What one read of a model stream delivered is handled as one: its text deltas, and each tool
call's argument deltas, joined (``adapters/base.py``), and what a read delivered before a bad
payload kept."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from copilot_runtime.adapters import openai_adapter
from copilot_runtime.adapters.base import (
    FinishChunk,
    ModelChunk,
    ModelRequest,
    TextChunk,
    ToolCallChunk,
    UpstreamError,
    UsageChunk,
    chunks_per_read,
    joined,
)
from copilot_runtime.adapters.openai_adapter import OpenAIAdapter, parse_chunk, parse_read
from copilot_runtime.adapters.sse_transport import SseTransport


def _call(
    index: int, arguments: str, *, id: str | None = None, name: str | None = None
) -> ToolCallChunk:
    return ToolCallChunk(index=index, id=id, name=name, arguments_delta=arguments)


def test_adjacent_text_deltas_become_one() -> None:
    chunks: list[ModelChunk] = [TextChunk("Hel"), TextChunk("lo"), TextChunk(" world")]
    assert joined(chunks) == [TextChunk("Hello world")]


def test_a_calls_argument_deltas_join_under_its_first_chunks_id_and_name() -> None:
    chunks: list[ModelChunk] = [
        _call(0, "", id="call-1", name="lookup"),
        _call(0, '{"q": '),
        _call(0, '"x"}'),
    ]
    assert joined(chunks) == [_call(0, '{"q": "x"}', id="call-1", name="lookup")]


def test_order_is_kept_and_only_neighbours_of_one_kind_and_call_join() -> None:
    chunks: list[ModelChunk] = [
        TextChunk("a"),
        TextChunk("b"),
        _call(0, "", id="c0", name="f"),
        _call(1, "", id="c1", name="g"),
        _call(0, "{}"),  # back to call 0: not its neighbour, so not joined
        _call(1, "{"),
        _call(1, "}"),
        FinishChunk("tool_calls"),
        UsageChunk(input_tokens=3, output_tokens=4),
    ]
    assert joined(chunks) == [
        TextChunk("ab"),
        _call(0, "", id="c0", name="f"),
        _call(1, "", id="c1", name="g"),
        _call(0, "{}"),
        _call(1, "{}"),
        FinishChunk("tool_calls"),
        UsageChunk(input_tokens=3, output_tokens=4),
    ]


def test_the_chunks_given_are_not_changed() -> None:
    first = TextChunk("a")
    chunks: list[ModelChunk] = [first, TextChunk("b")]
    joined(chunks)
    assert first == TextChunk("a")
    assert chunks == [TextChunk("a"), TextChunk("b")]


def _content(text: str) -> bytes:
    return orjson.dumps({"choices": [{"index": 0, "delta": {"content": text}}]})


_ROLE = orjson.dumps({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})


async def _reads(*reads: list[bytes]) -> AsyncIterator[list[bytes]]:
    for read in reads:
        yield read
    raise AssertionError("read past the end")


@pytest.fixture(params=["payload by payload", "read at once"])
def at_once(request: pytest.FixtureRequest) -> bool:
    """Each stream test runs with ``parse`` alone and with the adapter's ``parse_read``."""
    return bool(request.param == "read at once")


async def _chunks(reads: AsyncIterator[list[bytes]], into: list[ModelChunk], at_once: bool) -> None:
    async for chunk in chunks_per_read(
        reads, parse_chunk, end=b"[DONE]", parse_read=parse_read if at_once else None
    ):
        into.append(chunk)


def _payload(choices: object, **more: object) -> bytes:
    return orjson.dumps({"id": "c1", "object": "chat.completion.chunk", "choices": choices, **more})


_SHAPES = {
    "text": _content("Hel"),
    "more text": _content("lo"),
    "role only": _ROLE,
    "empty text": _content(""),
    "null text": _payload([{"index": 0, "delta": {"content": None}}]),
    "empty payload": b"",
    "text and finish": _payload([{"index": 0, "delta": {"content": "!"}, "finish_reason": "stop"}]),
    "finish": _payload([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
    "call opens": _payload(
        [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {"index": 0, "id": "call-1", "function": {"name": "f", "arguments": ""}}
                    ]
                },
            }
        ]
    ),
    "call arguments": _payload(
        [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]
    ),
    "two choices": _payload(
        [{"index": 0, "delta": {"content": "a"}}, {"index": 1, "delta": {"content": "b"}}]
    ),
    "usage": _payload([], usage={"prompt_tokens": 3, "completion_tokens": 4}),
    "text and usage": _payload(
        [{"index": 0, "delta": {"content": "u"}}], usage={"prompt_tokens": 1}
    ),
    "service error": orjson.dumps({"error": {"message": "overloaded"}}),
    "not json": b"{not json",
    "two values": b'{"choices": []}, {"choices": []}',
    "not an object": b"[1, 2]",
    # As the real service sends them: the fields the runtime does not read around the delta.
    "text in its envelope": orjson.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "system_fingerprint": "fp",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": "\u00e9t\u00e9 "},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
            "usage": None,
        }
    ),
    "text and call": _payload(
        [
            {
                "index": 0,
                "delta": {
                    "content": "t",
                    "tool_calls": [{"index": 0, "function": {"arguments": "{}"}}],
                },
            }
        ]
    ),
    "number text": _payload([{"index": 0, "delta": {"content": 5}}]),
    "list text": _payload([{"index": 0, "delta": {"content": [{"type": "text", "text": "x"}]}}]),
    "null delta": _payload([{"index": 0, "delta": None}]),
    "text delta": _payload([{"index": 0, "delta": "x"}]),
    "choice not an object": _payload(["x"]),
    "choices not a list": _payload({"index": 0, "delta": {"content": "x"}}),
    "null choices": _payload(None),
    "falsy error": _payload([{"index": 0, "delta": {"content": "e"}}], error={}),
    "not utf-8 in an unread field": b'{"id": "\xff", "choices": [{"delta": {"content": "x"}}]}',
    "deep unread field": b'{"x": ' + b"[" * 3000 + b"]" * 3000 + b', "choices": []}',
    "repeated key": b'{"choices": [{"delta": {"content": "a", "content": "b"}}]}',
}


@pytest.mark.parametrize(
    "names",
    [
        ["text", "more text", "text", "more text"],
        ["role only", "text", "empty text", "null text", "empty payload", "more text"],
        ["text", "text and finish", "usage"],
        ["text", "call opens", "call arguments", "call arguments", "text", "finish"],
        ["text", "two choices", "more text", "text and usage", "more text"],
        ["text", "more text", "service error", "text"],
        ["text", "not json", "more text"],
        ["text", "two values", "more text"],
        ["more text", "not an object"],
        ["call arguments", "text", "text", "call opens"],
        ["empty payload"],
        ["empty text"],
        ["empty text", "null text", "finish"],
        ["role only", "empty text"],
        ["text in its envelope", "text in its envelope", "finish", "usage"],
        ["text", "number text", "more text"],
        ["text", "list text", "more text"],
        ["text", "null delta", "text delta", "more text"],
        ["text", "choice not an object", "more text"],
        ["text", "choices not a list"],
        ["text", "null choices", "more text", "falsy error", "text"],
        ["text", "not utf-8 in an unread field", "more text"],
        ["text", "deep unread field", "more text"],
        ["repeated key", "text"],
        ["text", "text and call", "more text"],
    ],
)
def test_a_read_parsed_at_once_gives_what_parsing_each_payload_and_joining_gives(
    names: list[str],
) -> None:
    payloads = [_SHAPES[name] for name in names]
    expected: list[ModelChunk] = []
    expected_failure: Exception | None = None
    try:
        for data in payloads:
            expected += parse_chunk(data)
    except Exception as error:
        expected_failure = error

    chunks, failure = parse_read(payloads)

    assert chunks == joined(expected)
    assert type(failure) is type(expected_failure)


def _parsed_one_by_one(payloads: list[bytes]) -> tuple[list[ModelChunk], type | None]:
    chunks: list[ModelChunk] = []
    try:
        for data in payloads:
            chunks += parse_chunk(data)
    except Exception as error:
        return joined(chunks), type(error)
    return joined(chunks), None


@pytest.mark.parametrize("seed", range(40))
def test_any_mix_of_payloads_read_at_once_gives_what_parsing_each_gives(seed: int) -> None:
    generator = random.Random(seed)
    names = sorted(_SHAPES)
    # Mostly text deltas, as a reply is, with every other shape among them.
    payloads = [
        _SHAPES[generator.choice(names)] if generator.random() < 0.3 else _content(str(n))
        for n in range(generator.randint(1, 60))
    ]

    chunks, failure = parse_read(payloads)

    assert (chunks, None if failure is None else type(failure)) == _parsed_one_by_one(payloads)


def test_a_read_of_text_deltas_is_decoded_into_the_fields_that_tell_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    told: list[str | None] = []
    typed_text = openai_adapter._typed_text

    def counting(chunk: Any) -> str | None:
        told.append(typed_text(chunk))
        return told[-1]

    monkeypatch.setattr(openai_adapter, "_typed_text", counting)
    reply = [_SHAPES["text in its envelope"]] * 50 + [_SHAPES["finish"], _SHAPES["usage"]]

    chunks, failure = parse_read(reply)

    assert told == ["\u00e9t\u00e9 "] * 50 + [None, None]
    assert failure is None
    assert chunks == [
        TextChunk("\u00e9t\u00e9 " * 50),
        FinishChunk("stop"),
        UsageChunk(input_tokens=3, output_tokens=4),
    ]
    # A field of another type than the fields read have: the read is parsed payload by payload.
    assert parse_read([_SHAPES["text"], _SHAPES["number text"]])[0] == [TextChunk("Hel")]
    assert len(told) == 52


def test_a_number_beyond_a_double_in_an_unread_field_does_not_fail_a_text_delta() -> None:
    """The one difference from decoding whole, which refuses it (orjson)."""
    huge = b'{"created": 1e999, "choices": [{"delta": {"content": "x"}}]}'
    with pytest.raises(orjson.JSONDecodeError):
        parse_chunk(huge)

    assert parse_read([_content("a"), huge]) == ([TextChunk("ax")], None)


async def test_the_first_text_goes_out_alone_then_each_reads_deltas_together(
    at_once: bool,
) -> None:
    received: list[ModelChunk] = []
    reads = _reads(
        [_ROLE, _content("a"), _content("b"), _content("c")],
        [_content("d"), _content("e"), b"[DONE]", b"never parsed"],
    )
    await _chunks(reads, received, at_once)
    assert received == [TextChunk("a"), TextChunk("bc"), TextChunk("de")]


async def test_a_bad_payload_raises_after_what_the_read_delivered_before_it(
    at_once: bool,
) -> None:
    received: list[ModelChunk] = []
    reads = _reads([_content("a"), _content("b"), _content("c"), b"{not json", _content("d")])
    with pytest.raises(orjson.JSONDecodeError):
        await _chunks(reads, received, at_once)
    assert received == [TextChunk("a"), TextChunk("bc")]


async def test_a_service_error_before_any_text_is_raised_at_once(at_once: bool) -> None:
    received: list[ModelChunk] = []
    failure = orjson.dumps({"error": {"message": "overloaded"}})
    with pytest.raises(UpstreamError) as caught:
        await _chunks(_reads([_ROLE, failure, _content("a")]), received, at_once)
    assert caught.value.code == "UPSTREAM_ERROR"
    assert received == []


class _Service:
    """A chat service answering a request with ``writes``, one ``write`` each (each event in
    its own HTTP chunk). After the first, each write waits for ``next()``: a test that asks
    for it once it has received the previous one knows each write came in a read of its own."""

    def __init__(self, writes: list[bytes]) -> None:
        self._writes = writes
        self._go: asyncio.Queue[None] = asyncio.Queue()
        self._server: asyncio.Server | None = None

    def next(self) -> None:
        self._go.put_nowait(None)

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for number, events in enumerate(self._writes):
            if number:
                await self._go.get()
            writer.write(events)
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()


def _events(*payloads: bytes) -> bytes:
    """SSE events in one write, each in its own HTTP chunk."""
    out = b""
    for payload in payloads:
        event = b"data: " + payload + b"\n\n"
        out += b"%x\r\n%s\r\n" % (len(event), event)
    return out


async def test_the_transport_hands_over_what_each_read_delivered() -> None:
    service = _Service([_events(b"1", b"2", b"3"), _events(b"4"), _events(b"5", b"[DONE]")])
    transport = SseTransport(headers={}, timeout=5, max_retries=0)
    batches = []
    try:
        async with service as url:
            async for batch in transport.event_batches(url + "/x", {"a": 1}):
                batches.append(batch)
                service.next()
    finally:
        await transport.aclose()
    assert batches == [[b"1", b"2", b"3"], [b"4"], [b"5", b"[DONE]"]]


@pytest.mark.parametrize(
    ("writes", "expected"),
    [
        # Four tokens in one read: the first alone, then the rest as one delta.
        (
            [_events(_content("a"), _content("b"), _content("c"), _content("d"), b"[DONE]")],
            ["a", "bcd"],
        ),
        # A token per read, as a paced model sends them: a delta each.
        ([_events(_content("a")), _events(_content("b")), _events(b"[DONE]")], ["a", "b"]),
    ],
    ids=["one read", "a read per token"],
)
async def test_the_openai_adapter_yields_a_delta_per_read(
    writes: list[bytes], expected: list[str]
) -> None:
    received: list[ModelChunk] = []
    await _stream(_Service(writes), received)
    assert received == [TextChunk(text) for text in expected]


async def _stream(service: _Service, received: list[ModelChunk]) -> None:
    """The text chunks the OpenAI adapter yields from ``service``'s answer, into ``received``,
    asking for the next write after each."""
    request = ModelRequest(messages=[{"role": "user", "content": "hi"}])
    async with service as url:
        adapter = OpenAIAdapter(
            api_key="k", base_url=url + "/v1", model="m", timeout=5, max_retries=0
        )
        try:
            async for chunk in adapter.stream(request):
                if type(chunk) is TextChunk:
                    received.append(chunk)
                    service.next()
        finally:
            await adapter.aclose()


async def test_text_a_read_delivered_before_a_service_error_still_streams() -> None:
    failure = orjson.dumps({"error": {"message": "overloaded"}})
    received: list[ModelChunk] = []
    with pytest.raises(UpstreamError) as caught:
        # Three tokens and the error in one write, so in one read.
        writes = [_events(_content("a"), _content("b"), _content("c"), failure)]
        await _stream(_Service(writes), received)
    assert caught.value.code == "UPSTREAM_ERROR"
    assert received == [TextChunk("a"), TextChunk("bc")]


@pytest.mark.parametrize("name", ["number text", "list text"])
def test_a_delta_that_is_not_a_string_is_the_services_error(name: str) -> None:
    with pytest.raises(UpstreamError) as caught:
        parse_chunk(_SHAPES[name])
    assert caught.value.code == "UPSTREAM_ERROR"
    arguments = _payload([{"delta": {"tool_calls": [{"function": {"arguments": {"q": 1}}}]}}])
    with pytest.raises(UpstreamError):
        parse_chunk(arguments)


@pytest.mark.parametrize("ending", ["end marker", "failed payload"])
async def test_the_reads_are_closed_when_the_stream_ends_before_them(
    at_once: bool, ending: str
) -> None:
    """A stream ends at its end marker (or a payload it cannot parse) with its reads still
    open: they are closed then (their connection released), not left to the garbage collector
    and the event loop."""
    closed: list[str] = []

    async def reads() -> AsyncIterator[list[bytes]]:
        try:
            yield [_content("Hel"), b"[DONE]" if ending == "end marker" else b"{not json"]
            yield [_content("never read")]
        finally:
            closed.append("closed")

    got: list[ModelChunk] = []
    iterator = reads()  # held here: a collected generator would be closed by the collector
    if ending == "end marker":
        await _chunks(iterator, got, at_once)
    else:
        with pytest.raises(ValueError):  # the payload's JSON error, once "Hel" has gone out
            await _chunks(iterator, got, at_once)
    assert got == [TextChunk("Hel")]
    assert closed == ["closed"]
    assert iterator.ag_frame is None
