"""Answers as the front sends them: the same bytes whichever kind of response they are."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.http import HttpResponse, StreamingHttpResponse

from copilot_runtime.endpoints.front import _send_response
from copilot_runtime.http.responses import STREAM_HEADERS, ByteStreamResponse, LastChunk


async def _chunks() -> AsyncIterator[bytes]:
    yield b"data: one\n\n"
    yield b"data: two\n\n"


async def test_a_byte_stream_carries_the_stream_headers_and_its_chunks_as_given() -> None:
    chunks = _chunks()
    response = ByteStreamResponse(chunks, content_type="text/event-stream")
    assert response["Content-Type"] == "text/event-stream"
    for name, value in STREAM_HEADERS.items():
        assert response[name] == value
    # The front sends these as they are; Django's handler reads streaming_content.
    assert response.chunks is chunks


async def test_django_reads_the_same_bytes_from_a_byte_stream() -> None:
    response = ByteStreamResponse(_chunks(), content_type="text/event-stream")
    assert [part async for part in response.streaming_content] == [
        b"data: one\n\n",
        b"data: two\n\n",
    ]


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/api/copilotkit",
        "raw_path": b"/api/copilotkit",
        "query_string": b"",
        "headers": [],
        "scheme": "http",
        "server": ("127.0.0.1", 8000),
    }


async def _sent(response: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await _send_response(response, send, scope=_scope())
    return messages


@pytest.mark.parametrize("kind", [ByteStreamResponse, StreamingHttpResponse])
async def test_the_front_sends_a_streamed_answer_chunk_by_chunk(kind: Any) -> None:
    # The runtime's own streams are ByteStreamResponses; any other streamed answer a hook
    # or a view returns through the front is sent the same way.
    messages = await _sent(kind(_chunks(), content_type="text/event-stream"))
    assert messages[0]["type"] == "http.response.start" and messages[0]["status"] == 200
    assert [m["body"] for m in messages[1:]] == [b"data: one\n\n", b"data: two\n\n", b""]
    assert [m.get("more_body", False) for m in messages[1:]] == [True, True, False]


async def test_the_front_sends_a_whole_answer_in_one_body() -> None:
    messages = await _sent(HttpResponse(b'{"ok": true}', content_type="application/json"))
    assert [m["type"] for m in messages] == ["http.response.start", "http.response.body"]
    assert messages[1]["body"] == b'{"ok": true}'


async def test_a_last_chunk_ends_the_answer_in_the_same_message() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b"data: one\n\n"
        yield LastChunk(b"data: two\n\n")

    messages = await _sent(ByteStreamResponse(chunks(), content_type="text/event-stream"))
    assert [m["body"] for m in messages[1:]] == [b"data: one\n\n", b"data: two\n\n"]
    assert [m["more_body"] for m in messages[1:]] == [True, False]


async def test_nothing_after_a_last_chunk_is_sent_and_the_stream_still_runs_to_its_end() -> None:
    ended: list[str] = []

    async def chunks() -> AsyncIterator[bytes]:
        try:
            yield LastChunk(b"data: end\n\n")
            yield b"data: stray\n\n"
        finally:
            ended.append("finally")

    messages = await _sent(ByteStreamResponse(chunks(), content_type="text/event-stream"))
    assert [m["body"] for m in messages[1:]] == [b"data: end\n\n"]
    assert ended == ["finally"]


async def test_the_end_of_the_answer_does_not_cut_the_streams_own_ending_short() -> None:
    """Once the answer is whole, the server reports a disconnect to anyone still receiving;
    the front's disconnect watcher must not cancel what the stream does after its last chunk."""
    tail: list[str] = []
    complete = asyncio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        try:
            yield LastChunk(b"data: end\n\n")
            await asyncio.sleep(0.05)
            tail.append("ran")
        except asyncio.CancelledError:
            tail.append("cancelled")
            raise

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            complete.set()

    async def receive() -> dict[str, Any]:
        await complete.wait()
        return {"type": "http.disconnect"}

    response = ByteStreamResponse(chunks(), content_type="text/event-stream")
    await _send_response(response, send, scope=_scope(), receive=receive)
    assert tail == ["ran"]


async def test_a_client_leaving_mid_answer_cancels_the_stream_and_the_request_ends() -> None:
    stream_saw: list[str] = []
    first_sent = asyncio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        try:
            yield b"data: one\n\n"
            await asyncio.sleep(30)
            yield b"data: never\n\n"
        except asyncio.CancelledError:
            stream_saw.append("cancelled")
            raise

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message.get("body"):
            first_sent.set()

    async def receive() -> dict[str, Any]:
        await first_sent.wait()
        return {"type": "http.disconnect"}

    async def request() -> int:
        response = ByteStreamResponse(chunks(), content_type="text/event-stream")
        await _send_response(response, send, scope=_scope(), receive=receive)
        task = asyncio.current_task()
        assert task is not None
        return task.cancelling()  # nothing of the client's leaving is left pending

    assert await asyncio.wait_for(asyncio.create_task(request()), 5) == 0
    assert stream_saw == ["cancelled"]
    assert [m.get("body") for m in sent[1:]] == [b"data: one\n\n"]


async def test_a_request_cancelled_while_its_answer_streams_stays_cancelled() -> None:
    streaming = asyncio.Event()

    async def chunks() -> AsyncIterator[bytes]:
        yield b"data: one\n\n"
        streaming.set()
        await asyncio.sleep(30)
        yield b"data: never\n\n"

    async def send(message: dict[str, Any]) -> None:
        pass

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(30)
        return {"type": "http.disconnect"}

    response = ByteStreamResponse(chunks(), content_type="text/event-stream")
    task = asyncio.create_task(_send_response(response, send, scope=_scope(), receive=receive))
    await asyncio.wait_for(streaming.wait(), 5)
    task.cancel()  # the server stopping, say
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
