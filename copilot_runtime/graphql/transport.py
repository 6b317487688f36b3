r"""Wire framing of GraphQL payloads, byte for byte as graphql-yoga (CopilotKit's server).

multipart/mixed (what the CopilotKit client picks; ``\r\n`` is CRLF):

- ``multipart_preamble()``: ``\r\n---``
- ``multipart_part(payload)``, per payload: ``\r\nContent-Type: application/json;
  charset=utf-8\r\nContent-Length: N\r\n\r\n<json>\r\n---``
- ``multipart_end()``: ``--\r\n``

Server-sent events: ``sse_next(payload)`` is ``event: next\ndata: <json>\n\n``,
``sse_complete()`` is ``event: complete\ndata:\n\n``. JSON is compact (orjson).
"""

from __future__ import annotations

import functools
from typing import Any

import orjson

MULTIPART_CONTENT_TYPE = 'multipart/mixed; boundary="-"'
SSE_CONTENT_TYPE = "text/event-stream"
GRAPHQL_RESPONSE_CONTENT_TYPE = "application/graphql-response+json; charset=utf-8"
JSON_CONTENT_TYPE = "application/json; charset=utf-8"

_MULTIPART_PREAMBLE = b"\r\n---"
_MULTIPART_PART_HEAD = b"\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: "
_MULTIPART_END = b"--\r\n"
_SSE_COMPLETE = b"event: complete\ndata:\n\n"


def encode_json(payload: Any) -> bytes:
    """Compact UTF-8 JSON, the body of every part and of single results."""
    return orjson.dumps(payload)


def multipart_preamble() -> bytes:
    return _MULTIPART_PREAMBLE


def multipart_part(payload: Any) -> bytes:
    body = encode_json(payload)
    return b"%s%d\r\n\r\n%s\r\n---" % (_MULTIPART_PART_HEAD, len(body), body)


def multipart_end() -> bytes:
    return _MULTIPART_END


def sse_next(payload: Any) -> bytes:
    return b"event: next\ndata: %s\n\n" % encode_json(payload)


def sse_complete() -> bytes:
    return _SSE_COMPLETE


# Accept headers at most this long are parsed once per process: a client sends the same one
# with every request. Longer ones (none a CopilotKit client sends) are parsed each time, so
# the cache stays small whatever clients send.
_REMEMBERED_ACCEPT_LENGTH = 256


def _accepted_media_types(accept_header: str | None) -> frozenset[str]:
    """Media types of an Accept header, lower-cased, without parameters, minus ``q=0``."""
    if accept_header is None:
        return frozenset()
    if len(accept_header) <= _REMEMBERED_ACCEPT_LENGTH:
        return _remembered_media_types(accept_header)
    return _parsed_media_types(accept_header)


def _parsed_media_types(accept_header: str) -> frozenset[str]:
    accepted: set[str] = set()
    for media_range in accept_header.split(","):
        media_type, *parameters = (part.strip() for part in media_range.split(";"))
        if not media_type:
            continue
        refused = any(
            parameter.replace(" ", "").lower() in {"q=0", "q=0.0", "q=0.00", "q=0.000"}
            for parameter in parameters
        )
        if not refused:
            accepted.add(media_type.lower())
    return frozenset(accepted)


_remembered_media_types = functools.lru_cache(maxsize=64)(_parsed_media_types)


def accepts_multipart(accept_header: str | None) -> bool:
    return "multipart/mixed" in _accepted_media_types(accept_header)


def accepts_sse(accept_header: str | None) -> bool:
    return "text/event-stream" in _accepted_media_types(accept_header)
