"""Canonical events -> AG-UI events (plain dicts), and the TypeScript runtime's compaction.

The real client (``@ag-ui/client``) verifies the sequence: RUN_STARTED first, nothing after
RUN_FINISHED or RUN_ERROR, and no RUN_FINISHED while a text message or tool call is open. The
engine closes what it streams in the normal case, but a stopped or failed run can end with a
message still open, so the translator closes open messages and tool calls before the terminal
event, and drops whatever the engine produces after a run error. Events the client has no use
for (generation boundaries, loop limit trips) are not sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    GenerationEnd,
    GuardrailDecision,
    MetaEvent,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunError,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
    result_message_id,
)
from copilot_runtime.events.state_patch import JsonPatchError, apply_patch, patch_between

RUN_STARTED = "RUN_STARTED"
RUN_FINISHED = "RUN_FINISHED"
RUN_ERROR = "RUN_ERROR"
TEXT_MESSAGE_START = "TEXT_MESSAGE_START"
TEXT_MESSAGE_CONTENT = "TEXT_MESSAGE_CONTENT"
TEXT_MESSAGE_END = "TEXT_MESSAGE_END"
TOOL_CALL_START = "TOOL_CALL_START"
TOOL_CALL_ARGS = "TOOL_CALL_ARGS"
TOOL_CALL_END = "TOOL_CALL_END"
TOOL_CALL_RESULT = "TOOL_CALL_RESULT"
STATE_SNAPSHOT = "STATE_SNAPSHOT"
STATE_DELTA = "STATE_DELTA"
MESSAGES_SNAPSHOT = "MESSAGES_SNAPSHOT"
CUSTOM = "CUSTOM"
REASONING_START = "REASONING_START"
REASONING_MESSAGE_START = "REASONING_MESSAGE_START"
REASONING_MESSAGE_CONTENT = "REASONING_MESSAGE_CONTENT"
REASONING_MESSAGE_END = "REASONING_MESSAGE_END"
REASONING_END = "REASONING_END"
REASONING_ENCRYPTED_VALUE = "REASONING_ENCRYPTED_VALUE"

# The roles TEXT_MESSAGE_START accepts (``TextMessageRoleSchema``).
_TEXT_ROLES = frozenset({"developer", "system", "assistant", "user"})
# The AI SDK's finish reasons (what the TypeScript runtime's RUN_FINISHED carries), by the
# OpenAI words the adapters report.
_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
    "error": "error",
}
INCOMPLETE_STREAM_CODE = "INCOMPLETE_STREAM"
INCOMPLETE_STREAM_MESSAGE = "Run ended without emitting a terminal event"


def finish_reason(provider_reason: str) -> str:
    return _FINISH_REASONS.get(provider_reason, "other")


class RunUsage:
    """The run's token usage per (provider, model), as RUN_FINISHED reports it.

    ``cache_writes``: the entries count the input written to the provider's prompt cache
    (``cacheWriteInputTokens``, which AG-UI 1.0 defines and 0.0.59 does not)."""

    __slots__ = ("cache_writes", "entries")

    def __init__(self, *, cache_writes: bool = False) -> None:
        self.entries: dict[tuple[str, str], dict[str, Any]] = {}
        self.cache_writes = cache_writes

    def add(
        self,
        *,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        reasoning_tokens: int,
        cached_input_tokens: int,
        cache_write_input_tokens: int,
    ) -> None:
        entry = self.entries.get((provider, model))
        if entry is None:
            entry = {"model": model} if not provider else {"provider": provider, "model": model}
            entry.update(
                inputTokens=0, outputTokens=0, totalTokens=0, reasoningTokens=0, cachedInputTokens=0
            )
            if self.cache_writes:
                entry["cacheWriteInputTokens"] = 0
            self.entries[(provider, model)] = entry
        entry["inputTokens"] += input_tokens
        entry["outputTokens"] += output_tokens
        entry["totalTokens"] += input_tokens + output_tokens
        entry["reasoningTokens"] += reasoning_tokens
        entry["cachedInputTokens"] += cached_input_tokens
        if self.cache_writes:
            entry["cacheWriteInputTokens"] += cache_write_input_tokens

    def as_list(self) -> list[dict[str, Any]]:
        return [dict(entry) for entry in self.entries.values()]


def run_started(*, thread_id: str, run_id: str, run_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": RUN_STARTED, "threadId": thread_id, "runId": run_id, "input": run_input}


class Translator:
    """Stateful, for one run: feed it the run's events in order.

    With ``state_deltas``, an agent's new state goes out as a ``STATE_DELTA`` (RFC 6902) from
    the state the client holds whenever that is smaller than the whole snapshot: the client
    holds ``client_state`` (what it sent with the run; None when it sent none) and then each
    state this stream gave it. A replay sends snapshots only.
    """

    def __init__(
        self,
        *,
        thread_id: str,
        run_id: str,
        state_deltas: bool = False,
        client_state: dict[str, Any] | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.state_deltas = state_deltas
        self.client_state = client_state
        self.state_sent = False  # a state event went out in this run
        # Open text messages (id -> their start event) and tool calls (id -> start event).
        self.open_text: dict[str, dict[str, Any]] = {}
        self.open_tools: dict[str, dict[str, Any]] = {}
        # Open reasoning messages: id -> the two start events a resumed stream repeats.
        self.open_reasoning: dict[str, list[dict[str, Any]]] = {}
        self.ended = False  # RUN_FINISHED or RUN_ERROR was produced
        # What RUN_FINISHED reports: the last model call's finish reason, the run's usage.
        self.finish_reason: str | None = None
        self.usage = RunUsage()

    def translate(self, event: Event) -> list[dict[str, Any]]:
        if self.ended:
            return []
        kind = type(event)
        if kind is TextDelta:
            if event.message_id not in self.open_text or not event.delta:
                return []
            return [
                {"type": TEXT_MESSAGE_CONTENT, "messageId": event.message_id, "delta": event.delta}
            ]
        if kind is ActionArgs:
            if event.action_execution_id not in self.open_tools or not event.delta:
                return []
            return [
                {
                    "type": TOOL_CALL_ARGS,
                    "toolCallId": event.action_execution_id,
                    "delta": event.delta,
                }
            ]
        if kind is ReasoningDelta:
            if event.message_id not in self.open_reasoning or not event.delta:
                return []
            return [
                {
                    "type": REASONING_MESSAGE_CONTENT,
                    "messageId": event.message_id,
                    "delta": event.delta,
                }
            ]
        if kind is ReasoningStart:
            if event.message_id in self.open_reasoning:
                return []
            starts = [
                {"type": REASONING_START, "messageId": event.message_id},
                {
                    "type": REASONING_MESSAGE_START,
                    "messageId": event.message_id,
                    "role": "reasoning",
                },
            ]
            self.open_reasoning[event.message_id] = starts
            return list(starts)
        if kind is ReasoningEnd:
            if self.open_reasoning.pop(event.message_id, None) is None:
                return []
            closers = _reasoning_closers(event.message_id)
            if event.encrypted_value:
                # Set on the client's reasoning message, which it sends back with the history.
                sealed = {
                    "type": REASONING_ENCRYPTED_VALUE,
                    "subtype": "message",
                    "entityId": event.message_id,
                    "encryptedValue": event.encrypted_value,
                }
                return [sealed, *closers]
            return closers
        if kind is TextStart:
            if event.message_id in self.open_text:
                return []
            role = event.role if event.role in _TEXT_ROLES else "assistant"
            text_start = {"type": TEXT_MESSAGE_START, "messageId": event.message_id, "role": role}
            self.open_text[event.message_id] = text_start
            return [text_start]
        if kind is TextEnd:
            if event.message_id not in self.open_text:
                return []
            del self.open_text[event.message_id]
            return [{"type": TEXT_MESSAGE_END, "messageId": event.message_id}]
        if kind is ActionStart:
            if event.action_execution_id in self.open_tools:
                return []
            start: dict[str, Any] = {
                "type": TOOL_CALL_START,
                "toolCallId": event.action_execution_id,
                "toolCallName": event.action_name,
            }
            if event.parent_message_id:
                start["parentMessageId"] = event.parent_message_id
            self.open_tools[event.action_execution_id] = start
            return [start]
        if kind is ActionEnd:
            if event.action_execution_id not in self.open_tools:
                return []
            del self.open_tools[event.action_execution_id]
            return [{"type": TOOL_CALL_END, "toolCallId": event.action_execution_id}]
        if kind is ActionResult:
            return [
                {
                    "type": TOOL_CALL_RESULT,
                    "messageId": result_message_id(event.action_execution_id),
                    "toolCallId": event.action_execution_id,
                    "content": event.result,
                    "role": "tool",
                }
            ]
        if kind is AgentStateSnapshot:
            return self._state(event.state, delta=event.delta, replaced=event.replaced)
        if kind is MetaEvent:
            return [{"type": CUSTOM, "name": event.name, "value": event.value}]
        if kind is GenerationEnd:
            if event.finish_reason:
                self.finish_reason = finish_reason(event.finish_reason)
            if not (event.input_tokens or event.output_tokens):
                return []  # the provider reported no usage: no entry, as in TypeScript
            self.usage.add(
                provider=event.provider,
                model=event.model,
                input_tokens=event.input_tokens,
                output_tokens=event.output_tokens,
                reasoning_tokens=event.reasoning_tokens,
                cached_input_tokens=event.cached_input_tokens,
                cache_write_input_tokens=event.cache_write_input_tokens,
            )
            return []
        if kind is GuardrailDecision:
            if event.model and (event.input_tokens or event.output_tokens):
                # A guardrails classifier's model call is part of what the run cost.
                self.usage.add(
                    provider="",
                    model=event.model,
                    input_tokens=event.input_tokens,
                    output_tokens=event.output_tokens,
                    reasoning_tokens=event.reasoning_tokens,
                    cached_input_tokens=event.cached_input_tokens,
                    cache_write_input_tokens=event.cache_write_input_tokens,
                )
            return []
        if kind is RunError:
            return self.error(message=event.message, code=event.code)
        if kind is RunFinished:
            if event.status == "failed":
                # A failed run always logs its RunError first; this one did not say why.
                return self.error(message="The run failed.", code="RUN_FAILED")
            return self.finish()
        return []

    def _state(
        self, state: dict[str, Any], *, delta: list[dict[str, Any]] | None, replaced: bool
    ) -> list[dict[str, Any]]:
        if not self.state_deltas:
            return [{"type": STATE_SNAPSHOT, "snapshot": state}]
        held, self.client_state = self.client_state, state
        first, self.state_sent = not self.state_sent, True
        if held is None or replaced:
            return [{"type": STATE_SNAPSHOT, "snapshot": state}]
        if delta is not None and _patched(held, delta) == state:
            # The agent's own patch, as it sent it, when it takes the client's state there;
            # the run's first one after the state it starts from, as TS's built-in agent sends.
            patch = {"type": STATE_DELTA, "delta": delta}
            return [{"type": STATE_SNAPSHOT, "snapshot": held}, patch] if first else [patch]
        delta = patch_between(held, state)
        if not delta:
            return []  # the client already holds this state
        # Sizes compared as JSON: a state replaced wholesale is cheaper as a snapshot.
        if len(orjson.dumps(delta)) < len(orjson.dumps(state)):
            return [{"type": STATE_DELTA, "delta": delta}]
        return [{"type": STATE_SNAPSHOT, "snapshot": state}]

    def translate_all(self, events: Iterable[Event]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for event in events:
            out.extend(self.translate(event))
        return out

    def reopen(self) -> list[dict[str, Any]]:
        """The start events of what is open: for a client resuming in the middle of a run,
        whose new stream must start the messages it goes on streaming into."""
        reasoning = [start for starts in self.open_reasoning.values() for start in starts]
        return [*reasoning, *self.open_text.values(), *self.open_tools.values()]

    def close_open(self) -> list[dict[str, Any]]:
        closers: list[dict[str, Any]] = [
            closer
            for message_id in self.open_reasoning
            for closer in _reasoning_closers(message_id)
        ]
        self.open_reasoning.clear()
        closers.extend(
            {"type": TEXT_MESSAGE_END, "messageId": message_id} for message_id in self.open_text
        )
        closers.extend(
            {"type": TOOL_CALL_END, "toolCallId": call_id} for call_id in self.open_tools
        )
        self.open_text.clear()
        self.open_tools.clear()
        return closers

    def finish(self) -> list[dict[str, Any]]:
        if self.ended:
            return []
        self.ended = True
        finished: dict[str, Any] = {
            "type": RUN_FINISHED,
            "threadId": self.thread_id,
            "runId": self.run_id,
        }
        if self.finish_reason is not None:
            finished["finishReason"] = self.finish_reason
        if self.usage.entries:
            finished["usage"] = self.usage.as_list()
        return [*self.close_open(), finished]

    def error(self, *, message: str, code: str | None) -> list[dict[str, Any]]:
        if self.ended:
            return []
        self.ended = True
        error: dict[str, Any] = {"type": RUN_ERROR, "message": message}
        if code:
            error["code"] = code
        error["threadId"] = self.thread_id
        error["runId"] = self.run_id
        return [*self.close_open(), error]

    def incomplete(self) -> list[dict[str, Any]]:
        """The stream ended without a terminal event (the run was lost)."""
        return self.error(message=INCOMPLETE_STREAM_MESSAGE, code=INCOMPLETE_STREAM_CODE)


def _reasoning_closers(message_id: str) -> list[dict[str, Any]]:
    return [
        {"type": REASONING_MESSAGE_END, "messageId": message_id},
        {"type": REASONING_END, "messageId": message_id},
    ]


# --- compaction (``compactEvents`` of @ag-ui/client) ------------------------------------------


class _Lifecycle:
    """One text message or tool call being compacted: its start, merged deltas, end, and the
    events that arrived while it was open (emitted after it)."""

    __slots__ = ("deltas", "end", "others", "start")

    def __init__(self) -> None:
        self.start: dict[str, Any] | None = None
        self.deltas: list[str] = []
        self.end: dict[str, Any] | None = None
        self.others: list[dict[str, Any]] = []

    def flush(self, out: list[dict[str, Any]], delta_event: dict[str, Any]) -> None:
        if self.start is not None:
            out.append(self.start)
        if self.deltas:
            out.append({**delta_event, "delta": "".join(self.deltas)})
        if self.end is not None:
            out.append(self.end)
        out.extend(self.others)


def compact_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive deltas of a message or tool call merged into one event; state events between
    run boundaries folded into one snapshot. The same result as the TypeScript runtime's replay,
    so a reconnecting client rebuilds the same messages."""
    out: list[dict[str, Any]] = []
    texts: dict[str, _Lifecycle] = {}
    tools: dict[str, _Lifecycle] = {}
    pending_state: list[dict[str, Any]] = []

    def text(message_id: str) -> _Lifecycle:
        return texts.setdefault(message_id, _Lifecycle())

    def tool(call_id: str) -> _Lifecycle:
        return tools.setdefault(call_id, _Lifecycle())

    def flush_state() -> None:
        if pending_state:
            out.append({"type": STATE_SNAPSHOT, "snapshot": pending_state[-1]["snapshot"]})
            pending_state.clear()

    for event in events:
        kind = event["type"]
        if kind == TEXT_MESSAGE_START:
            entry = text(event["messageId"])
            if entry.start is None:
                entry.start = event
        elif kind == TEXT_MESSAGE_CONTENT:
            text(event["messageId"]).deltas.append(event["delta"])
        elif kind == TEXT_MESSAGE_END:
            entry = texts.pop(event["messageId"], None) or _Lifecycle()
            entry.end = event
            entry.flush(
                out, {"type": TEXT_MESSAGE_CONTENT, "messageId": event["messageId"], "delta": ""}
            )
        elif kind == TOOL_CALL_START:
            entry = tool(event["toolCallId"])
            if entry.start is None:
                entry.start = event
        elif kind == TOOL_CALL_ARGS:
            tool(event["toolCallId"]).deltas.append(event["delta"])
        elif kind == TOOL_CALL_END:
            entry = tools.pop(event["toolCallId"], None) or _Lifecycle()
            entry.end = event
            entry.flush(
                out, {"type": TOOL_CALL_ARGS, "toolCallId": event["toolCallId"], "delta": ""}
            )
        elif kind in (RUN_STARTED, RUN_FINISHED, RUN_ERROR):
            flush_state()
            out.append(event)
        elif kind == STATE_SNAPSHOT:
            pending_state.append(event)
        else:
            holder = next((entry for entry in texts.values() if entry.start is not None), None)
            if holder is None:
                holder = next((entry for entry in tools.values() if entry.start is not None), None)
            if holder is not None:
                holder.others.append(event)
            else:
                out.append(event)
    for message_id, entry in texts.items():
        entry.flush(out, {"type": TEXT_MESSAGE_CONTENT, "messageId": message_id, "delta": ""})
    for call_id, entry in tools.items():
        entry.flush(out, {"type": TOOL_CALL_ARGS, "toolCallId": call_id, "delta": ""})
    flush_state()
    return out


def _patched(document: dict[str, Any], delta: list[dict[str, Any]]) -> Any:
    try:
        return apply_patch(document, delta)
    except JsonPatchError:
        return None
