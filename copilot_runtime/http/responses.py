"""JSON responses in the shapes the runtime promises (never a traceback)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from django.http import HttpResponse, StreamingHttpResponse

STREAM_HEADERS = {
    # Nothing between the model's token and the client's socket may buffer the stream.
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",
}


class LastChunk(bytes):
    """The last chunk of a ``ByteStreamResponse``: the front sends it as the answer's end, so
    it and the end of the chunked body go out in one write, not two. Nothing may follow it on
    the wire (the front sends nothing the stream yields after it)."""

    __slots__ = ()


class ByteStreamResponse(StreamingHttpResponse):
    """A streamed answer whose chunks are bytes already, with the headers every stream has.

    Django's ``streaming_content`` passes each chunk through a generator of its own that
    converts it to bytes; the hot path's front sends ``chunks`` as they are instead (one
    generator step less per chunk, on the way of every token)."""

    def __init__(self, chunks: AsyncIterator[bytes], *, content_type: str) -> None:
        super().__init__(chunks, content_type=content_type)
        self.chunks = chunks
        for name, value in STREAM_HEADERS.items():
            self[name] = value


def json_response(
    payload: Any,
    *,
    status: int = 200,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> HttpResponse:
    response = HttpResponse(orjson.dumps(payload), status=status, content_type=content_type)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def json_error(status: int, error: str, message: str | None = None, **extra: Any) -> HttpResponse:
    payload: dict[str, Any] = {"error": error}
    if message is not None:
        payload["message"] = message
    payload.update(extra)
    return json_response(payload, status=status)


# A value the database refused (DataError): the caller's mistake, never an outage.
REFUSED_VALUE = (
    "The request holds a value the runtime cannot store (a NUL character or an id too long)."
)
