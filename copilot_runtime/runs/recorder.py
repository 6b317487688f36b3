"""Turning a run's event stream into what is stored: the log, messages, states, usage.

``observe`` is called once per event on the hot path and only touches memory; ``take_batch``
hands the accumulated writes to the flusher. Consecutive deltas of one message are coalesced
in the log, so a 2,000-token reply becomes a few dozen log rows, not 2,000.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.utils import timezone

from conversations.services.messages import OutputMessage
from conversations.services.runs import INTERRUPT_META_EVENT_NAMES, LoggedEvent, Usage
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    GenerationEnd,
    GenerationStart,
    GuardrailDecision,
    LimitTrip,
    MetaEvent,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunError,
    TextDelta,
    TextEnd,
    TextStart,
    result_message_id,
    without_later_fields,
)

STREAM_ERROR_REASON = "Error streaming message content"
CANCELLED_REASON = "The run was stopped before this message finished."
_DELTA_TYPES = (TextDelta.type, ReasoningDelta.type, ActionArgs.type)
# The deltas keyed by a message id (the others by a tool call's id).
_MESSAGE_DELTA_TYPES = (TextDelta.type, ReasoningDelta.type)


@dataclass(slots=True)
class _PendingEntry:
    type: str
    payload: dict[str, Any]
    parts: list[str] | None = None  # deltas being coalesced

    def finish(self) -> dict[str, Any]:
        if self.parts is not None:
            self.payload["delta"] = "".join(self.parts)
        return self.payload


@dataclass(slots=True)
class Batch:
    events: list[LoggedEvent]
    messages: list[OutputMessage]
    agent_states: list[dict[str, Any]]
    first_token_at: dt.datetime | None

    @property
    def is_empty(self) -> bool:
        return not (self.events or self.messages or self.agent_states or self.first_token_at)


@dataclass
class RunRecorder:
    run_id: str
    thread_id: str
    agent_name: str
    next_seq: int = 1
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    error: RunError | None = None
    # The agent paused for the user (an interrupt meta event): the run ends ``interrupted``.
    interrupted: bool = False
    limit_trips: list[dict[str, Any]] = field(default_factory=list)
    first_token_at: dt.datetime | None = None
    output: list[OutputMessage] = field(default_factory=list)
    _pending: list[_PendingEntry] = field(default_factory=list)
    _open: dict[str, tuple[OutputMessage, list[str]]] = field(default_factory=dict)
    _finished: list[OutputMessage] = field(default_factory=list)
    _states: list[dict[str, Any]] = field(default_factory=list)
    _first_token_unsent: bool = False
    # Whether the web processes reading this run's log read fields added after the first
    # release (events.LATER_FIELDS): not when a web process of that release queued it.
    later_fields: bool = True

    def observe(self, event: Event) -> None:
        self._log(event)
        kind = type(event)
        if kind is TextDelta:
            if (opened := self._open.get(event.message_id)) is not None:
                opened[1].append(event.delta)
            if self.first_token_at is None:
                self.first_token_at = timezone.now()
                self._first_token_unsent = True
        elif kind is ActionArgs:
            if (opened := self._open.get(event.action_execution_id)) is not None:
                opened[1].append(event.delta)
        elif kind is ReasoningDelta:
            if (opened := self._open.get(event.message_id)) is not None:
                opened[1].append(event.delta)
        elif kind is TextStart:
            message = OutputMessage(
                message_id=event.message_id,
                kind="text",
                role=event.role,
                parent_message_id=event.parent_message_id or "",
            )
            self._open[event.message_id] = (message, [])
        elif kind is TextEnd:
            self._close(event.message_id)
        elif kind is ReasoningStart:
            # Stored as a message of its own, before what it led to (the inspector folds it).
            message = OutputMessage(message_id=event.message_id, kind="reasoning", role="reasoning")
            self._open[event.message_id] = (message, [])
        elif kind is ReasoningEnd:
            opened = self._open.get(event.message_id)
            if opened is not None and event.encrypted_value:
                opened[0].arguments = {"encryptedValue": event.encrypted_value}
            self._close(event.message_id)
        elif kind is ActionStart:
            message = OutputMessage(
                message_id=event.action_execution_id,
                kind="action_execution",
                role="assistant",
                action_name=event.action_name,
                parent_message_id=event.parent_message_id or "",
            )
            self._open[event.action_execution_id] = (message, [])
            if self.first_token_at is None:
                self.first_token_at = timezone.now()
                self._first_token_unsent = True
        elif kind is ActionEnd:
            self._close(event.action_execution_id)
        elif kind is ActionResult:
            self._keep(
                OutputMessage(
                    message_id=result_message_id(event.action_execution_id),
                    kind="result",
                    role="tool",
                    action_name=event.action_name,
                    action_execution_id=event.action_execution_id,
                    result=event.result,
                )
            )
        elif kind is AgentStateSnapshot:
            self._states.append(
                {
                    "agent_name": event.agent_name,
                    "state": event.state,
                    "node_name": event.node_name,
                    "run_id": event.run_id,
                    "active": event.active,
                    "running": event.running,
                }
            )
        elif kind is GenerationStart:
            self.model = self.model or event.model
        elif kind is GenerationEnd:
            self.usage.input_tokens += event.input_tokens
            self.usage.output_tokens += event.output_tokens
            self.usage.cached_input_tokens += event.cached_input_tokens
            self.usage.reasoning_tokens += event.reasoning_tokens
        elif kind is GuardrailDecision:
            # A guardrails classifier's model call is part of the run's usage.
            self.usage.input_tokens += event.input_tokens
            self.usage.output_tokens += event.output_tokens
            self.usage.cached_input_tokens += event.cached_input_tokens
            self.usage.reasoning_tokens += event.reasoning_tokens
        elif kind is RunError:
            self.error = event
        elif kind is MetaEvent:
            if event.name in INTERRUPT_META_EVENT_NAMES:
                self.interrupted = True
        elif kind is LimitTrip:
            self.limit_trips.append(event.to_payload())

    def _log(self, event: Event) -> None:
        event_type = event.type
        if event_type in _DELTA_TYPES:
            key = (
                event.message_id
                if event_type in _MESSAGE_DELTA_TYPES
                else event.action_execution_id
            )
            last = self._pending[-1] if self._pending else None
            if last is not None and last.type == event_type and last.parts is not None:
                last_key = last.payload.get("message_id", last.payload.get("action_execution_id"))
                if last_key == key:
                    last.parts.append(event.delta)
                    return
            payload = event.to_payload()
            self._pending.append(_PendingEntry(event_type, payload, [payload["delta"]]))
            return
        payload = event.to_payload()
        if not self.later_fields:
            payload = without_later_fields(event_type, payload)
        self._pending.append(_PendingEntry(event_type, payload))

    def _close(self, message_id: str) -> None:
        opened = self._open.pop(message_id, None)
        if opened is None:
            return
        message, parts = opened
        text = "".join(parts)
        if message.kind == "text" or message.kind == "reasoning":
            message.content = text
        else:
            message.arguments = _parse_arguments(text)
        self._keep(message)

    def _keep(self, message: OutputMessage) -> None:
        self._finished.append(message)
        self.output.append(message)

    def close_open_messages(self, *, reason: str) -> None:
        """Store what was produced of unfinished messages, marked failed with ``reason``."""
        for message_id in list(self._open):
            message = self._open[message_id][0]
            message.status = "failed"
            message.status_reason = reason
            self._close(message_id)

    @property
    def first_token_pending(self) -> bool:
        """The first token is observed but not written yet: it is flushed at once."""
        return self._first_token_unsent

    @property
    def has_pending(self) -> bool:
        return bool(self._pending or self._finished or self._states or self._first_token_unsent)

    def take_batch(self) -> Batch:
        events = []
        for entry in self._pending:
            events.append(LoggedEvent(seq=self.next_seq, type=entry.type, payload=entry.finish()))
            self.next_seq += 1
        batch = Batch(
            events=events,
            messages=self._finished,
            agent_states=self._states,
            first_token_at=self.first_token_at if self._first_token_unsent else None,
        )
        self._pending = []
        self._finished = []
        self._states = []
        self._first_token_unsent = False
        return batch


def _parse_arguments(text: str) -> Any:
    if not text.strip():
        return {}
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return {"_raw": text}
