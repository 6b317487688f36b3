"""Answers as the front sends them: the same bytes whichever kind of response they are."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.http import HttpResponse, StreamingHttpResponse

from copilot_runtime.http.front import _send_response
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
