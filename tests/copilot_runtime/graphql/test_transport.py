"""multipart/mixed and SSE framing, byte for byte as graphql-yoga, and Accept negotiation."""

from __future__ import annotations

import pytest

from copilot_runtime.graphql import transport
from copilot_runtime.graphql.transport import (
    MULTIPART_CONTENT_TYPE,
    SSE_CONTENT_TYPE,
    accepts_multipart,
    accepts_sse,
    multipart_end,
    multipart_part,
    multipart_preamble,
    sse_complete,
    sse_next,
)

CLIENT_ACCEPT = (
    "application/graphql-response+json, application/graphql+json, application/json, "
    "text/event-stream, multipart/mixed"
)


def test_multipart_framing_matches_yoga() -> None:
    payload = {"hasNext": False}
    body = multipart_preamble() + multipart_part(payload) + multipart_end()
    assert body == (
        b"\r\n---"
        b"\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 17\r\n\r\n"
        b'{"hasNext":false}\r\n---'
        b"--\r\n"
    )
    assert MULTIPART_CONTENT_TYPE == 'multipart/mixed; boundary="-"'


def test_content_length_counts_utf8_bytes() -> None:
    part = multipart_part({"items": ["é"]})
    # 15 characters, 16 bytes: the length is in bytes.
    assert b"Content-Length: 16\r\n" in part
    assert part.endswith(b'{"items":["\xc3\xa9"]}\r\n---')


def test_multipart_parts_split_like_urql() -> None:
    # urql splits on the boundary, skips the preamble, and parses JSON after the headers.
    payloads = [{"data": {"a": 1}, "hasNext": True}, {"hasNext": False}]
    body = multipart_preamble() + b"".join(multipart_part(p) for p in payloads) + multipart_end()
    chunks = body.split(b"\r\n---")[1:]
    parsed = [chunk.split(b"\r\n\r\n", 1)[1] for chunk in chunks if b"\r\n\r\n" in chunk]
    assert parsed == [b'{"data":{"a":1},"hasNext":true}', b'{"hasNext":false}']


def test_sse_framing_matches_yoga() -> None:
    assert sse_next({"data": {"hello": "Hello World"}}) == (
        b'event: next\ndata: {"data":{"hello":"Hello World"}}\n\n'
    )
    assert sse_complete() == b"event: complete\ndata:\n\n"
    assert SSE_CONTENT_TYPE == "text/event-stream"


@pytest.mark.parametrize(
    ("accept", "multipart", "sse"),
    [
        (CLIENT_ACCEPT, True, True),
        ("text/event-stream", False, True),
        ("multipart/mixed; deferSpec=20220824, application/json", True, False),
        ("MULTIPART/MIXED", True, False),
        ("application/json", False, False),
        ("multipart/mixed;q=0, text/event-stream", False, True),
        ("", False, False),
        (None, False, False),
        # Longer than the remembered headers: parsed the same.
        ("application/x-" + "y" * 300 + ", multipart/mixed", True, False),
        ("text/event-stream;q=0, " + "a/b, " * 80, False, False),
    ],
)
def test_accept_negotiation(accept: str | None, multipart: bool, sse: bool) -> None:
    assert accepts_multipart(accept) is multipart
    assert accepts_sse(accept) is sse


def test_an_accept_header_is_parsed_once_and_a_long_one_is_not_remembered() -> None:
    transport._remembered_media_types.cache_clear()
    for _ in range(3):
        assert accepts_multipart(CLIENT_ACCEPT)
    long = "multipart/mixed, " + "a/b, " * 80
    for _ in range(3):
        assert accepts_multipart(long)
    info = transport._remembered_media_types.cache_info()
    assert (info.misses, info.hits, info.currsize) == (1, 2, 1)
