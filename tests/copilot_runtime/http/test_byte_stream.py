"""Streamed answers: the same bytes whichever server path sends them."""

from __future__ import annotations

from collections.abc import AsyncIterator

from copilot_runtime.http.responses import STREAM_HEADERS, ByteStreamResponse


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
