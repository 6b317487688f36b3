"""The small part of HTTP/1.1 the fake needs: read requests, write heads, chunked framing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from http import HTTPStatus

import orjson

MAX_BODY_BYTES = 64 * 1024 * 1024
LAST_CHUNK = b"0\r\n\r\n"


class BadRequest(Exception):
    """The bytes on the connection are not a request we can answer; the connection is dropped."""


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool


async def read_request(reader: asyncio.StreamReader) -> HttpRequest | None:
    """Read one request; None when the client closed the connection between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if error.partial.strip():
            raise BadRequest("connection closed in the middle of a request head") from error
        return None
    except asyncio.LimitOverrunError as error:
        raise BadRequest("request head too large") from error

    request_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3:
        raise BadRequest(f"malformed request line {request_line!r}")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in header_lines:
        name, separator, value = line.partition(":")
        if not separator:
            raise BadRequest(f"malformed header line {line!r}")
        headers[name.strip().lower()] = value.strip()

    body = await _read_body(reader, headers)
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
    return HttpRequest(
        method=method.upper(),
        path=target.split("?", 1)[0],
        headers=headers,
        body=body,
        keep_alive=keep_alive,
    )


def response_head(status: int, *, headers: Iterable[tuple[str, str]], keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {status} {_reason(status)}"]
    lines.extend(f"{name}: {value}" for name, value in headers)
    lines.append(f"connection: {'keep-alive' if keep_alive else 'close'}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def json_response(
    status: int,
    payload: object,
    *,
    keep_alive: bool,
    extra_headers: Iterable[tuple[str, str]] = (),
) -> bytes:
    body = orjson.dumps(payload)
    headers = [
        ("content-type", "application/json"),
        ("content-length", str(len(body))),
        *extra_headers,
    ]
    return response_head(status, headers=headers, keep_alive=keep_alive) + body


def stream_head(*, keep_alive: bool, extra_headers: Iterable[tuple[str, str]] = ()) -> bytes:
    headers = [
        ("content-type", "text/event-stream; charset=utf-8"),
        ("cache-control", "no-cache"),
        ("transfer-encoding", "chunked"),
        *extra_headers,
    ]
    return response_head(200, headers=headers, keep_alive=keep_alive)


def chunk(data: bytes) -> bytes:
    """Frame bytes as one HTTP/1.1 chunk."""
    return b"%x\r\n%b\r\n" % (len(data), data)


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _read_chunked_body(reader)
    length_text = headers.get("content-length", "0")
    if not length_text.isdigit():
        raise BadRequest(f"invalid content-length {length_text!r}")
    length = int(length_text)
    if length > MAX_BODY_BYTES:
        raise BadRequest("request body too large")
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError as error:
        raise BadRequest("connection closed in the middle of a request body") from error


async def _read_chunked_body(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    try:
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                # Skip optional trailers up to the empty line.
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass
                return b"".join(parts)
            total += size
            if total > MAX_BODY_BYTES:
                raise BadRequest("request body too large")
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as error:
        raise BadRequest("malformed chunked request body") from error


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"
