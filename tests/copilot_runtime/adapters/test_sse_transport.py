"""How long the transport waits on a model service, against the project's fake upstream.

The timeout bounds each wait on the service: for the answer's headers, and every silence while
the answer streams. A stream slower than the timeout in total, or a consumer slow to read what
was already received, is not a silence.
"""

from __future__ import annotations

import asyncio
import gzip
import random
import time
from typing import Any

import orjson
import pytest

from copilot_runtime.adapters.base import UpstreamError
from copilot_runtime.adapters.sse_transport import SseTransport, data_payloads

TIMEOUT = 0.4
GIVE_UP_SECONDS = 10.0


async def _read(
    fake_upstream: Any, directive: dict[str, Any], *, pause_between_reads: float = 0.0
) -> list[bytes]:
    """The ``data:`` payloads of a streamed chat answer following ``directive``."""
    transport = SseTransport(headers={}, timeout=TIMEOUT, max_retries=0)
    payload = {
        "model": "fake",
        "stream": True,
        "messages": [{"role": "user", "content": "FAKE: " + orjson.dumps(directive).decode()}],
    }
    received: list[bytes] = []

    async def read() -> None:
        url = f"{fake_upstream.base_url}/chat/completions"
        async for batch in transport.event_batches(url, payload):
            received.extend(batch)
            if pause_between_reads:
                await asyncio.sleep(pause_between_reads)

    try:
        # Bounded here too: a transport that never times out fails the test, not hangs it.
        await asyncio.wait_for(read(), GIVE_UP_SECONDS)
    finally:
        await transport.aclose()
    return received


def _tokens(received: list[bytes]) -> str:
    text = ""
    for data in received:
        if data == b"[DONE]":
            continue
        for choice in orjson.loads(data).get("choices", []):
            text += choice.get("delta", {}).get("content") or ""
    return text


@pytest.mark.parametrize(
    "silence",
    [{"hang": True}, {"hang_before_headers": True}],
    ids=["silent after its headers", "never answering"],
)
async def test_a_silent_service_times_out(fake_upstream: Any, silence: dict[str, Any]) -> None:
    started = time.monotonic()
    with pytest.raises(UpstreamError) as caught:
        await _read(fake_upstream, silence)
    assert caught.value.code == "UPSTREAM_TIMEOUT"
    assert TIMEOUT <= time.monotonic() - started < TIMEOUT + 2


async def _refusal_from_raw_service(raw: bytes, *, max_retries: int = 0) -> UpstreamError:
    """The error reading from a service that answers one request with ``raw`` and then waits
    for the client to close the connection."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(raw)
        await writer.drain()
        await reader.read()  # until the client gives up and closes

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = SseTransport(headers={}, timeout=TIMEOUT, max_retries=max_retries)
    try:
        with pytest.raises(UpstreamError) as caught:
            await asyncio.wait_for(
                _first(transport.event_batches(f"http://127.0.0.1:{port}/v1/chat/completions", {})),
                GIVE_UP_SECONDS,
            )
    finally:
        await transport.aclose()
        server.close()
    return caught.value


async def test_an_error_answer_whose_body_never_comes_is_still_reported() -> None:
    # A service that sends an error's status and headers, then nothing of the body it
    # announced: the status is reported once the timeout has passed, not waited on forever.
    started = time.monotonic()
    error = await _refusal_from_raw_service(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 100\r\n\r\n{"
    )
    assert error.code == "UPSTREAM_SERVER_ERROR"
    assert error.status_code == 503
    assert TIMEOUT <= time.monotonic() - started < TIMEOUT + 2


async def _first(events: Any) -> Any:
    async for data in events:
        return data
    return None


async def test_a_silence_in_the_middle_of_a_stream_times_out(fake_upstream: Any) -> None:
    # Three tokens, each after a silence longer than the timeout.
    with pytest.raises(UpstreamError) as caught:
        await _read(fake_upstream, {"tokens": 3, "delay_ms": int(TIMEOUT * 2500)})
    assert caught.value.code == "UPSTREAM_TIMEOUT"


async def test_a_stream_longer_than_the_timeout_is_no_silence(fake_upstream: Any) -> None:
    # Ten tokens 100 ms apart: a second in all, never silent for the timeout.
    started = time.monotonic()
    received = await _read(fake_upstream, {"tokens": 10, "delay_ms": 100})
    assert time.monotonic() - started > 2 * TIMEOUT
    assert _tokens(received) == "t0" + "".join(f" t{n}" for n in range(1, 10))
    assert received[-1] == b"[DONE]"


async def test_a_consumer_slow_to_read_is_no_silence_of_the_service(fake_upstream: Any) -> None:
    # The whole answer arrives at once; the consumer takes longer than the timeout per read.
    received = await _read(fake_upstream, {"tokens": 3}, pause_between_reads=TIMEOUT * 1.5)
    assert _tokens(received) == "t0 t1 t2"
    assert received[-1] == b"[DONE]"


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        ("ftp://127.0.0.1/v1/chat/completions", {}),
        ("http://127.0.0.1:9/v1/chat/completions", {"Authorization": "Bearer k\r\nX-Evil: 1"}),
    ],
    ids=["not an http URL", "a header with a line break"],
)
async def test_a_request_that_cannot_be_sent_is_a_clear_error_not_retried(
    url: str, headers: dict[str, str]
) -> None:
    transport = SseTransport(headers=headers, timeout=TIMEOUT, max_retries=3)
    started = time.monotonic()
    with pytest.raises(UpstreamError) as caught:
        await _first(transport.event_batches(url, {}))
    await transport.aclose()
    assert caught.value.code == "UPSTREAM_UNREACHABLE"
    assert "cannot be sent" in str(caught.value)
    assert time.monotonic() - started < 0.4  # at once, without the retries' back-off


async def test_a_compressed_answer_is_a_clear_error_not_an_empty_stream() -> None:
    # Asked for as it is, a service that compresses anyway: refused by name, never read as text.
    body = gzip.compress(b"data: [DONE]\n\n")
    error = await _refusal_from_raw_service(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body),
        max_retries=2,
    )
    assert error.code == "UPSTREAM_BAD_STREAM"
    assert "gzip" in str(error)


def _line_by_line(received: bytes) -> tuple[list[bytes], bytes]:
    """What the transport read before ``data_payloads``: every whole line, tested one by one."""
    *lines, rest = received.split(b"\n")
    return [line[5:].strip() for line in lines if line.startswith(b"data:")], rest


_SSE_PIECES = [
    b"data: {}\n\n",
    b'data: {"a": 1}\r\n\r\n',
    b"data:{}\n",
    b"data:\n",
    b"data: \t[DONE] \n",
    b": a comment\n",
    b"event: message\n",
    b"id: 7\n",
    b"retry: 10\n",
    b"\n",
    b"\r\n",
    b" data: not a field\n",
    b"Data: not a field either\n",
    b"data: x\rdata: y\n",
    b"dat",
    b"a: split\n",
    b"data: \xff\xfe bytes\n",
]


@pytest.mark.parametrize("seed", range(30))
def test_data_payloads_reads_what_testing_each_line_read(seed: int) -> None:
    chooser = random.Random(seed)
    stream = b"".join(chooser.choice(_SSE_PIECES) for _ in range(chooser.randint(1, 40)))
    # Fed as reads split anywhere, what is still arriving carried over to the next read.
    pending_new, pending_old = b"", b""
    got: list[bytes] = []
    expected: list[bytes] = []
    position = 0
    while position < len(stream):
        step = chooser.randint(1, 24)
        data = stream[position : position + step]
        position += step
        pending_new += data
        pending_old += data
        if b"\n" not in data:
            continue
        batch, pending_new = data_payloads(pending_new)
        got.extend(batch)
        batch, pending_old = _line_by_line(pending_old)
        expected.extend(batch)
    assert got == expected
    assert pending_new == pending_old


def test_data_payloads_keeps_the_line_still_arriving() -> None:
    assert data_payloads(b"data: one\n\ndata: tw") == ([b"one"], b"data: tw")
    assert data_payloads(b"event: x\ndata:two \r\n") == ([b"two"], b"")
    assert data_payloads(b"data: no line end yet") == ([], b"data: no line end yet")
