"""AG-UI events as SSE bytes: ``data: <json>\\n\\n`` per event, no ``event:`` or ``id:`` lines.

The hot path is one token to one ``TEXT_MESSAGE_CONTENT`` (or ``TOOL_CALL_ARGS``) event: its
bytes are a prefix built once per message plus the JSON-encoded delta, with no dict built and
no whole-event serialisation. Every other event goes through the translator and ``orjson``.
Events already waiting are encoded into one chunk, so a fast model costs few writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from copilot_runtime.agui.generation import Translator10, run_started_1_0
from copilot_runtime.agui.translate import Translator, run_started
from copilot_runtime.events import ActionArgs, Event, TextDelta

_DATA = b"data: "
_END = b"\n\n"
_DELTA_END = b"}\n\n"


def sse_frame(event: dict[str, Any]) -> bytes:
    return _DATA + orjson.dumps(event) + _END


def sse_frames(events: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(_DATA + orjson.dumps(event) + _END for event in events)


def _prefix(event_type: str, id_key: str, value: str) -> bytes:
    return (
        b'data: {"type":"'
        + event_type.encode()
        + b'","'
        + id_key.encode()
        + b'":'
        + orjson.dumps(value)
        + b',"delta":'
    )


class SseEncoder:
    """Encodes one run's canonical events; ``finished`` once its terminal event is out.

    ``protocol_1_0``: the client speaks AG-UI 1.0 (``generation.py``); decided once, here, so
    the 0.0.59 path does no per-event work for it."""

    def __init__(
        self,
        *,
        thread_id: str,
        run_id: str,
        state_deltas: bool = False,
        client_state: dict[str, Any] | None = None,
        protocol_1_0: bool = False,
    ) -> None:
        self.protocol_1_0 = protocol_1_0
        self.translator = (Translator10 if protocol_1_0 else Translator)(
            thread_id=thread_id,
            run_id=run_id,
            state_deltas=state_deltas,
            client_state=client_state,
        )
        self._text_prefixes: dict[str, bytes] = {}
        self._args_prefixes: dict[str, bytes] = {}

    @property
    def finished(self) -> bool:
        return self.translator.ended

    def start(self, run_input: dict[str, Any]) -> bytes:
        translator = self.translator
        started = run_started(
            thread_id=translator.thread_id, run_id=translator.run_id, run_input=run_input
        )
        return sse_frame(run_started_1_0(started) if self.protocol_1_0 else started)

    def resume(self, seen: Iterable[Event]) -> bytes:
        """Take in events the client has already seen, without encoding them; returns the
        start events of the messages still open, which the resumed stream streams into."""
        for event in seen:
            self.translator.translate(event)
        reopened = self.translator.reopen()
        self._track(reopened)
        return sse_frames(reopened)

    def encode(self, events: Iterable[Event | None]) -> bytes:
        """The bytes for a batch; ``None`` (the end of the run's events) without a terminal
        event before it ends the stream with a RUN_ERROR."""
        chunks: list[bytes] = []
        translator = self.translator
        for event in events:
            if event is None:
                chunks.append(sse_frames(translator.incomplete()))
                continue
            kind = type(event)
            if kind is TextDelta:
                prefix = self._text_prefixes.get(event.message_id)
                if prefix is not None and event.delta and not translator.ended:
                    chunks.append(prefix + orjson.dumps(event.delta) + _DELTA_END)
                continue
            if kind is ActionArgs:
                prefix = self._args_prefixes.get(event.action_execution_id)
                if prefix is not None and event.delta and not translator.ended:
                    chunks.append(prefix + orjson.dumps(event.delta) + _DELTA_END)
                continue
            produced = translator.translate(event)
            if not produced:
                continue
            chunks.append(sse_frames(produced))
            self._track(produced)
        return b"".join(chunks)

    def _track(self, produced: list[dict[str, Any]]) -> None:
        """Keep the per-message prefixes in step with what is open."""
        for event in produced:
            kind = event["type"]
            if kind == "TEXT_MESSAGE_START":
                message_id = event["messageId"]
                self._text_prefixes[message_id] = _prefix(
                    "TEXT_MESSAGE_CONTENT", "messageId", message_id
                )
            elif kind == "TEXT_MESSAGE_END":
                self._text_prefixes.pop(event["messageId"], None)
            elif kind == "TOOL_CALL_START":
                call_id = event["toolCallId"]
                self._args_prefixes[call_id] = _prefix("TOOL_CALL_ARGS", "toolCallId", call_id)
            elif kind == "TOOL_CALL_END":
                self._args_prefixes.pop(event["toolCallId"], None)
            elif kind in ("RUN_FINISHED", "RUN_ERROR"):
                self._text_prefixes.clear()
                self._args_prefixes.clear()
