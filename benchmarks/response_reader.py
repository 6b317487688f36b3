r"""Incremental reading of a ``multipart/mixed`` GraphQL response, as bytes arrive.

``MultipartMixedParser`` splits the body into part bodies the way urql does (delimiter
``\r\n--<boundary>``, preamble skipped, JSON after the first blank line), checking each part's
``Content-Length`` when it has one. ``StreamObservation`` watches the decoded payloads of the
client's ``generateCopilotResponse`` stream and records what the benchmark measures:

- the time of the first part carrying a text token, i.e. an ``items`` entry whose path ends
  in ``"content", <index>`` (time to first token);
- the number of tokens received: whitespace-separated words of each message's text (the fake
  upstream's tokens are one word each). Not the number of content items: the inline executor
  sends one item per token, a run relayed from a Celery worker arrives as the event log's
  coalesced deltas, several tokens per item (``content_items`` counts those);
- the response status code from the deferred ``status`` patch (``Success`` / ``Failed``);
- the time of the payload with ``hasNext: false`` (end of the response).

Compact JSON never holds a raw CR or LF, so the delimiter cannot occur inside a part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

ROOT_FIELD = "generateCopilotResponse"
DEFAULT_BOUNDARY = b"-"


class ResponseProtocolError(ValueError):
    """The response body is not the multipart/mixed framing the client expects."""


def boundary_from_content_type(content_type: str) -> bytes | None:
    """The ``boundary`` of a ``multipart/mixed`` content type (default ``-``), else None."""
    media_type, *parameters = (part.strip() for part in content_type.split(";"))
    if media_type.lower() != "multipart/mixed":
        return None
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "boundary":
            return value.strip().strip('"').encode("latin-1") or DEFAULT_BOUNDARY
    return DEFAULT_BOUNDARY


def _content_length(headers: bytes) -> int | None:
    for line in headers.split(b"\r\n"):
        name, separator, value = line.partition(b":")
        if separator and name.strip().lower() == b"content-length":
            try:
                return int(value.strip())
            except ValueError as exc:
                raise ResponseProtocolError(f"bad part Content-Length: {value!r}") from exc
    return None


def _part_body(segment: bytes) -> bytes:
    """The body of one part: what follows its headers' blank line, checked by length."""
    headers_end = segment.find(b"\r\n\r\n")
    if headers_end < 0:
        return segment.strip()
    body = segment[headers_end + 4 :]
    declared = _content_length(segment[:headers_end])
    if declared is not None and declared != len(body):
        raise ResponseProtocolError(
            f"part Content-Length {declared} but {len(body)} bytes before the next delimiter"
        )
    return body


class MultipartMixedParser:
    """Feed body bytes in any chunking; get back the bodies of the parts completed so far."""

    def __init__(self, boundary: bytes = DEFAULT_BOUNDARY) -> None:
        self._delimiter = b"\r\n--" + boundary
        # The first delimiter may come without its leading CRLF (RFC 2046): supply one.
        self._buffer = b"\r\n"
        self._preamble_skipped = False
        self.closed = False

    def feed(self, data: bytes) -> list[bytes]:
        if self.closed:
            return []  # the epilogue after the close delimiter means nothing
        buffer = self._buffer + data
        delimiter = self._delimiter
        bodies: list[bytes] = []
        start = 0
        while (index := buffer.find(delimiter, start)) >= 0:
            segment = buffer[start:index]
            start = index + len(delimiter)
            if self._preamble_skipped:
                body = _part_body(segment)
                if body:
                    bodies.append(body)
            else:
                self._preamble_skipped = True
            if buffer.startswith(b"--", start):
                return self._close(bodies)
        rest = buffer[start:]
        if self._preamble_skipped and rest.startswith(b"--"):
            return self._close(bodies)
        self._buffer = rest
        return bodies

    def _close(self, bodies: list[bytes]) -> list[bytes]:
        """The close delimiter: what follows it (the epilogue) means nothing."""
        self.closed = True
        self._buffer = b""
        return bodies

    @property
    def pending_bytes(self) -> int:
        """Bytes held back because the part they belong to is not complete yet."""
        return len(self._buffer)


@dataclass
class StreamObservation:
    """What one ``generateCopilotResponse`` stream delivered, and when (caller's clock)."""

    first_token_at: float | None = None
    finished_at: float | None = None
    content_items: int = 0
    parts: int = 0
    response_status: str | None = None
    failure: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    # Content items per message path, joined only when the tokens are counted.
    _content: dict[tuple[Any, ...], list[str]] = field(default_factory=dict, repr=False)

    @property
    def tokens(self) -> int:
        return sum(len("".join(pieces).split()) for pieces in self._content.values())

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    @property
    def succeeded(self) -> bool:
        return self.finished and self.response_status == "Success" and not self.errors

    def observe(self, payload: dict[str, Any], now: float) -> None:
        self.parts += 1
        errors = payload.get("errors")
        if errors:
            self.errors.extend(errors)
        for entry in payload.get("incremental") or ():
            path = entry.get("path") or ()
            items = entry.get("items")
            if items is not None:
                if len(path) >= 2 and path[-2] == "content" and items:
                    self.content_items += len(items)
                    pieces = self._content.setdefault(tuple(path[:-2]), [])
                    pieces.extend(item for item in items if isinstance(item, str))
                    if self.first_token_at is None:
                        self.first_token_at = now
            elif len(path) == 1 and path[0] == ROOT_FIELD:
                self._observe_response_patch(entry.get("data") or {})
        if payload.get("hasNext") is False and self.finished_at is None:
            self.finished_at = now

    def _observe_response_patch(self, data: dict[str, Any]) -> None:
        status = data.get("status")
        if not isinstance(status, dict):
            return
        self.response_status = status.get("code")
        if self.response_status != "Success":
            details = status.get("details") or {}
            description = details.get("description") if isinstance(details, dict) else None
            self.failure = f"{status.get('reason')}: {description}"


class StreamReader:
    """Parser plus observation: ``feed(chunk, now)`` as the body of one response arrives."""

    def __init__(self, boundary: bytes = DEFAULT_BOUNDARY) -> None:
        self.parser = MultipartMixedParser(boundary)
        self.observation = StreamObservation()

    def feed(self, data: bytes, now: float) -> None:
        observe = self.observation.observe
        for body in self.parser.feed(data):
            try:
                payload = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                raise ResponseProtocolError(f"part is not JSON: {body[:200]!r}") from exc
            if not isinstance(payload, dict):
                raise ResponseProtocolError(f"part is not a JSON object: {body[:200]!r}")
            observe(payload, now)
