"""Incremental reading of an AG-UI event stream (``text/event-stream``), as bytes arrive.

``SseParser`` splits the body into events the way ``@ag-ui/client`` does (events end at a blank
line; the ``data:`` lines of one event joined). ``AguiObservation`` records what the benchmark
measures, with the same attributes as the GraphQL reader's ``StreamObservation``:

- the time of the first ``TEXT_MESSAGE_CONTENT`` (time to first token);
- the tokens received: whitespace-separated words of each message's text (``content_items``
  counts the content events they came in);
- ``Success`` once ``RUN_FINISHED`` arrives, ``Failed`` (with the message) on ``RUN_ERROR``;
  either ends the response.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from benchmarks.response_reader import ResponseProtocolError

SSE_MEDIA_TYPE = "text/event-stream"


def is_event_stream(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == SSE_MEDIA_TYPE


class SseParser:
    """Feed body bytes in any chunking; get back the ``data`` of the events completed so far."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer + data
        *complete, self._buffer = buffer.split(b"\n\n")
        events = []
        for block in complete:
            lines = [
                line[5:].removeprefix(b" ")
                for line in block.split(b"\n")
                if line.startswith(b"data:")
            ]
            if lines:
                events.append(b"\n".join(lines))
        return events


@dataclass
class AguiObservation:
    """What one AG-UI run stream delivered, and when (caller's clock)."""

    first_token_at: float | None = None
    finished_at: float | None = None
    content_items: int = 0
    parts: int = 0
    response_status: str | None = None
    failure: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    _content: dict[str, list[str]] = field(default_factory=dict, repr=False)

    @property
    def tokens(self) -> int:
        return sum(len("".join(pieces).split()) for pieces in self._content.values())

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    @property
    def succeeded(self) -> bool:
        return self.finished and self.response_status == "Success" and not self.errors

    def observe(self, event: dict[str, Any], now: float) -> None:
        self.parts += 1
        kind = event.get("type")
        if kind == "TEXT_MESSAGE_CONTENT":
            self.content_items += 1
            self._content.setdefault(str(event.get("messageId")), []).append(
                str(event.get("delta") or "")
            )
            if self.first_token_at is None:
                self.first_token_at = now
        elif kind == "RUN_FINISHED" and self.finished_at is None:
            self.response_status = "Success"
            self.finished_at = now
        elif kind == "RUN_ERROR" and self.finished_at is None:
            self.response_status = "Failed"
            self.failure = f"{event.get('code')}: {event.get('message')}"
            self.finished_at = now


class AguiStreamReader:
    """Parser plus observation: ``feed(chunk, now)`` as the body of one response arrives."""

    def __init__(self) -> None:
        self.parser = SseParser()
        self.observation = AguiObservation()

    def feed(self, data: bytes, now: float) -> None:
        observe = self.observation.observe
        for payload in self.parser.feed(data):
            try:
                event = orjson.loads(payload)
            except orjson.JSONDecodeError as exc:
                raise ResponseProtocolError(f"event is not JSON: {payload[:200]!r}") from exc
            if not isinstance(event, dict):
                raise ResponseProtocolError(f"event is not a JSON object: {payload[:200]!r}")
            observe(event, now)
