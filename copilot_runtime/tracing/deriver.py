"""Spans derived from a run's canonical event stream: a pure reducer.

``SpanDeriver`` turns events into span signals and nothing else: no clock (the caller gives
each event's time), no database, no I/O, so fixtures of event sequences pin its output.

The tree of one run::

    run (or agent)            invoke_agent {agent}        the whole turn
    ├── generation            chat {model}                one per model call
    │   └── reasoning         reasoning                   when the events carry reasoning
    ├── tool                  execute_tool {name}         one per action call
    └── guardrail             guardrail {name}            one per guardrail decision

Rules:

- A generation opens at ``generation_start`` and closes at ``generation_end`` with the
  provider's usage and finish reason; its time to first chunk is the first text or tool-call
  event after its start. A ``run_error`` right after a failed model call is written onto it.
- A tool span opens when its arguments are complete (``action_end``), keyed by the tool call
  id, and closes at the matching ``action_result`` with its ``is_error``. A result whose call
  was made in an earlier run (an approved call executed now) is a span of no duration.
- ``flush`` (at the end of the run, whatever ended it) closes what is still open as
  incomplete: tools in the order they opened, reasoning, the generation, then the run.

A ``guardrail_decision`` is a guardrail span that lasted the evaluation's latency, with the
usage of the classifier call it may have made (counted in the run's usage, and priced).

Event types the runtime does not emit yet are handled by name, so their producers only have
to emit them: ``reasoning_start`` / ``reasoning_delta`` / ``reasoning_end`` (keyed by
``message_id``) and any other event whose type starts with ``guardrail`` (a span of no
duration).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing.signals import (
    KIND_AGENT,
    KIND_GENERATION,
    KIND_GUARDRAIL,
    KIND_REASONING,
    KIND_RUN,
    KIND_TOOL,
    Signal,
    SpanAnnotated,
    SpanClosed,
    SpanOpened,
)

ROOT_KEY = "run"
CLOSED_BY_RUN_END = "run_end"
_NOTHING: tuple[Signal, ...] = ()

Rule = Callable[["SpanDeriver", Any, float], Sequence[Signal]]
_RULES: dict[str, Rule] = {}


@dataclass(frozen=True, slots=True)
class RunSpanSpec:
    """What the root span says about the run."""

    run_id: str
    thread_id: str
    agent_name: str
    model: str = ""
    provider: str = ""
    # "agent" when an agent (not the plain chat engine) runs the turn.
    kind: str = KIND_RUN
    input: Any = None


@dataclass(slots=True)
class _Generation:
    key: str
    model: str
    started_at: float
    first_chunk_at: float | None = None
    text: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class _PendingTool:
    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _RunTotals:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    generations: int = 0
    tool_calls: int = 0
    state_snapshots: int = 0
    limit_trips: list[str] = field(default_factory=list)
    interrupts: list[str] = field(default_factory=list)
    error_code: str = ""
    error_message: str = ""
    status: str = ""


class SpanDeriver:
    """One run's spans, from its events. Call :meth:`start`, :meth:`observe` per event, then
    :meth:`flush` once; each returns the signals the call produced."""

    def __init__(self, root: RunSpanSpec, *, capture_content: bool = False) -> None:
        self.root = root
        self.capture_content = capture_content
        self._started = False
        self._finished = False
        self._open: dict[str, str] = {}  # key -> kind, in opening order
        self._generation: _Generation | None = None
        self._generation_count = 0
        self._last_failed_generation: str | None = None
        self._pending_tools: dict[str, _PendingTool] = {}
        self._reasoning_text: dict[str, list[str]] = {}
        self._point_spans = 0
        self._totals = _RunTotals()

    # --- driving ----------------------------------------------------------------------------

    def start(self, at: float) -> list[Signal]:
        if self._started:
            return []
        self._started = True
        root = self.root
        attributes = {
            attr.OPERATION_NAME: attr.OP_INVOKE_AGENT,
            attr.AGENT_NAME: root.agent_name,
            attr.CONVERSATION_ID: root.thread_id,
            attr.RUN_ID: root.run_id,
        }
        if root.provider:
            attributes[attr.PROVIDER_NAME] = root.provider
        if root.model:
            attributes[attr.REQUEST_MODEL] = root.model
        return [
            self.open_span(
                ROOT_KEY,
                kind=root.kind if root.kind in (KIND_RUN, KIND_AGENT) else KIND_RUN,
                name=f"{attr.OP_INVOKE_AGENT} {root.agent_name}",
                at=at,
                parent_key=None,
                input=root.input if self.capture_content else None,
                attributes=attributes,
            )
        ]

    def observe(self, event: Any, at: float) -> Sequence[Signal]:
        if self._finished:
            return _NOTHING
        event_type: str = event.type
        if event_type == "text_delta":  # the hot path: one per token
            generation = self._generation
            if generation is not None:
                if generation.first_chunk_at is None:
                    generation.first_chunk_at = at
                if self.capture_content:
                    generation.text.append(event.delta)
            return _NOTHING
        rule = _RULES.get(event_type)
        if rule is None:
            if not event_type.startswith("guardrail"):
                return _NOTHING
            rule = _guardrail
        signals = [] if self._started else self.start(at)
        signals.extend(rule(self, event, at))
        return signals

    def flush(self, at: float) -> list[Signal]:
        """Close everything still open, as incomplete; the run span last."""
        if self._finished:
            return []
        signals = [] if self._started else self.start(at)
        self._finished = True
        order = [k for k, kind in self._open.items() if kind == KIND_TOOL]
        order += [k for k, kind in self._open.items() if kind == KIND_REASONING]
        order += [
            k
            for k, kind in reversed(self._open.items())
            if kind not in (KIND_TOOL, KIND_REASONING) and k != ROOT_KEY
        ]
        for key in order:
            if key in self._reasoning_text:
                output = self._reasoning_output(key)
                signals.append(self._close(key, at, output=output, incomplete=True))
            elif self._generation is not None and key == self._generation.key:
                signals.append(self._close_generation(at, incomplete=True))
            else:
                signals.append(self._close(key, at, incomplete=True))
        if ROOT_KEY in self._open:
            signals.append(self._close_root(at))
        return signals

    # --- helpers for rules ------------------------------------------------------------------

    def open_span(
        self,
        key: str,
        *,
        kind: str,
        name: str,
        at: float,
        parent_key: str | None = ROOT_KEY,
        input: Any = None,
        attributes: dict[str, Any] | None = None,
    ) -> SpanOpened:
        self._open[key] = kind
        return SpanOpened(
            key=key,
            kind=kind,
            name=name,
            parent_key=parent_key,
            at=at,
            input=input,
            attributes=attributes or {},
        )

    def close_span(
        self,
        key: str,
        at: float,
        *,
        output: Any = None,
        attributes: dict[str, Any] | None = None,
        is_error: bool | None = None,
    ) -> SpanClosed | None:
        """Close an open span; None when ``key`` is not open."""
        if key not in self._open:
            return None
        return self._close(key, at, output=output, attributes=attributes, is_error=is_error)

    def point_span_key(self, prefix: str) -> str:
        """A fresh key for a span that opens and closes at once."""
        self._point_spans += 1
        return f"{prefix}:{self._point_spans}"

    @property
    def current_parent(self) -> str:
        """Where a span that belongs to the current model call goes."""
        return self._generation.key if self._generation is not None else ROOT_KEY

    def _close(
        self,
        key: str,
        at: float,
        *,
        output: Any = None,
        attributes: dict[str, Any] | None = None,
        is_error: bool | None = None,
        incomplete: bool = False,
    ) -> SpanClosed:
        del self._open[key]
        attributes = dict(attributes or {})
        if incomplete:
            attributes[attr.CLOSED_BY] = CLOSED_BY_RUN_END
        return SpanClosed(
            key=key,
            at=at,
            output=output if self.capture_content else None,
            attributes=attributes,
            is_error=is_error,
            is_complete=not incomplete,
        )

    # --- generations ------------------------------------------------------------------------

    def _open_generation(self, event: Any, at: float) -> list[Signal]:
        signals: list[Signal] = []
        if self._generation is not None:  # a call that never reported its end
            signals.append(self._close_generation(at, incomplete=True))
        self._generation_count += 1
        self._totals.generations += 1
        key = f"generation:{self._generation_count}"
        self._generation = _Generation(key=key, model=event.model, started_at=at)
        self._last_failed_generation = None
        attributes: dict[str, Any] = {
            attr.OPERATION_NAME: attr.OP_CHAT,
            attr.REQUEST_MODEL: event.model,
            attr.CONVERSATION_ID: self.root.thread_id,
        }
        if self.root.provider:
            attributes[attr.PROVIDER_NAME] = self.root.provider
        attributes.update(_request_parameters(event.parameters or {}))
        signals.append(
            self.open_span(
                key,
                kind=KIND_GENERATION,
                name=f"{attr.OP_CHAT} {event.model}",
                at=at,
                attributes=attributes,
            )
        )
        return signals

    def _end_generation(self, event: Any, at: float) -> list[Signal]:
        generation = self._generation
        if generation is None:
            return []
        totals = self._totals
        totals.input_tokens += event.input_tokens
        totals.output_tokens += event.output_tokens
        totals.cached_input_tokens += event.cached_input_tokens
        totals.reasoning_tokens += event.reasoning_tokens
        failed = event.finish_reason == "error"
        if failed:
            self._last_failed_generation = generation.key
        return [self._close_generation(at, end=event, is_error=True if failed else None)]

    def _close_generation(
        self, at: float, *, end: Any = None, is_error: bool | None = None, incomplete: bool = False
    ) -> SpanClosed:
        generation = self._generation
        assert generation is not None
        self._generation = None
        attributes: dict[str, Any] = {}
        if generation.first_chunk_at is not None:
            ttfc = generation.first_chunk_at - generation.started_at
            attributes[attr.RESPONSE_TIME_TO_FIRST_CHUNK] = round(ttfc, 6)
        if end is not None:
            attributes[attr.RESPONSE_MODEL] = end.model
            if end.finish_reason:
                attributes[attr.RESPONSE_FINISH_REASONS] = [end.finish_reason]
            attributes.update(
                {
                    attr.USAGE_INPUT_TOKENS: end.input_tokens,
                    attr.USAGE_OUTPUT_TOKENS: end.output_tokens,
                    attr.USAGE_CACHE_READ_INPUT_TOKENS: end.cached_input_tokens,
                    attr.USAGE_REASONING_OUTPUT_TOKENS: end.reasoning_tokens,
                }
            )
            if is_error:
                attributes[attr.ERROR_TYPE] = "model_error"
        output = None
        if self.capture_content and (generation.text or generation.tool_calls):
            output = {"role": "assistant", "content": "".join(generation.text) or None}
            if generation.tool_calls:
                output["tool_calls"] = generation.tool_calls
        return self._close(
            generation.key,
            at,
            output=output,
            attributes=attributes,
            is_error=is_error,
            incomplete=incomplete,
        )

    def _first_chunk(self, at: float) -> None:
        generation = self._generation
        if generation is not None and generation.first_chunk_at is None:
            generation.first_chunk_at = at

    # --- tools ------------------------------------------------------------------------------

    def _action_start(self, event: Any, at: float) -> list[Signal]:
        self._first_chunk(at)
        self._pending_tools[event.action_execution_id] = _PendingTool(name=event.action_name)
        return []

    def _action_args(self, event: Any, at: float) -> list[Signal]:
        self._first_chunk(at)
        if self.capture_content:
            pending = self._pending_tools.get(event.action_execution_id)
            if pending is not None:
                pending.arguments.append(event.delta)
        return []

    def _action_end(self, event: Any, at: float) -> list[Signal]:
        call_id = event.action_execution_id
        pending = self._pending_tools.pop(call_id, None)
        key = f"tool:{call_id}"
        if pending is None or key in self._open:
            return []
        self._totals.tool_calls += 1
        arguments = _parse_arguments("".join(pending.arguments)) if self.capture_content else None
        if self.capture_content and self._generation is not None:
            self._generation.tool_calls.append(
                {"id": call_id, "name": pending.name, "arguments": arguments}
            )
        return [
            self.open_span(
                key,
                kind=KIND_TOOL,
                name=f"{attr.OP_EXECUTE_TOOL} {pending.name}",
                at=at,
                input=arguments,
                attributes=_tool_attributes(pending.name, call_id),
            )
        ]

    def _action_result(self, event: Any, at: float) -> list[Signal]:
        call_id = event.action_execution_id
        key = f"tool:{call_id}"
        signals: list[Signal] = []
        attributes: dict[str, Any] = {}
        if event.is_error:
            attributes[attr.ERROR_TYPE] = "tool_error"
        if key not in self._open:
            # A call made in an earlier run (approved, and executed now): the execution
            # happened just before this result, so it is a span of no duration.
            self._totals.tool_calls += 1
            opened = _tool_attributes(event.action_name, call_id)
            opened["copilot.tool.resumed"] = True
            signals.append(
                self.open_span(
                    key,
                    kind=KIND_TOOL,
                    name=f"{attr.OP_EXECUTE_TOOL} {event.action_name}",
                    at=at,
                    attributes=opened,
                )
            )
        signals.append(
            self._close(
                key,
                at,
                output=_parse_result(event.result) if self.capture_content else None,
                attributes=attributes,
                is_error=bool(event.is_error),
            )
        )
        return signals

    # --- reasoning --------------------------------------------------------------------------

    def _reasoning_start(self, event: Any, at: float) -> list[Signal]:
        key = f"reasoning:{event.message_id}"
        if key in self._open:
            return []
        self._first_chunk(at)
        self._reasoning_text[key] = []
        return [
            self.open_span(
                key, kind=KIND_REASONING, name="reasoning", at=at, parent_key=self.current_parent
            )
        ]

    def _reasoning_delta(self, event: Any, at: float) -> list[Signal]:
        parts = self._reasoning_text.get(f"reasoning:{event.message_id}")
        if parts is not None and self.capture_content:
            parts.append(event.delta)
        return []

    def _reasoning_end(self, event: Any, at: float) -> list[Signal]:
        key = f"reasoning:{event.message_id}"
        if key not in self._open:
            return []
        return [self._close(key, at, output=self._reasoning_output(key))]

    def _reasoning_output(self, key: str) -> Any:
        text = "".join(self._reasoning_text.get(key) or [])
        return {"text": text} if text else None

    # --- the run ----------------------------------------------------------------------------

    def _agent_state(self, event: Any, at: float) -> list[Signal]:
        self._totals.state_snapshots += 1
        return []

    def _meta_event(self, event: Any, at: float) -> list[Signal]:
        self._totals.interrupts.append(str(event.name))
        return []

    def _limit_trip(self, event: Any, at: float) -> list[Signal]:
        self._totals.limit_trips.append(str(event.kind))
        return []

    def _run_error(self, event: Any, at: float) -> list[Signal]:
        self._totals.error_code = event.code
        self._totals.error_message = event.message
        failed = self._last_failed_generation
        if failed is None:
            return []
        # The model call that failed closed just before this error: say why on it.
        self._last_failed_generation = None
        return [
            SpanAnnotated(
                key=failed,
                attributes={attr.ERROR_TYPE: event.code, attr.ERROR_MESSAGE: event.message},
                is_error=True,
            )
        ]

    def _run_finished(self, event: Any, at: float) -> list[Signal]:
        self._totals.status = event.status
        return []

    def _close_root(self, at: float) -> SpanClosed:
        totals = self._totals
        attributes: dict[str, Any] = {
            attr.USAGE_INPUT_TOKENS: totals.input_tokens,
            attr.USAGE_OUTPUT_TOKENS: totals.output_tokens,
            attr.USAGE_CACHE_READ_INPUT_TOKENS: totals.cached_input_tokens,
            attr.USAGE_REASONING_OUTPUT_TOKENS: totals.reasoning_tokens,
            attr.GENERATIONS: totals.generations,
            attr.TOOL_CALLS: totals.tool_calls,
        }
        if totals.status:
            attributes[attr.RUN_STATUS] = totals.status
        if totals.state_snapshots:
            attributes[attr.STATE_SNAPSHOTS] = totals.state_snapshots
        if totals.limit_trips:
            attributes[attr.LIMIT_TRIPS] = list(totals.limit_trips)
        if totals.interrupts:
            attributes[attr.INTERRUPTS] = list(totals.interrupts)
        failed = bool(totals.error_code) or totals.status == "failed"
        if totals.error_code:
            attributes[attr.ERROR_TYPE] = totals.error_code
            attributes[attr.ERROR_MESSAGE] = totals.error_message
        elif failed:
            attributes[attr.ERROR_TYPE] = "failed"
        del self._open[ROOT_KEY]
        return SpanClosed(
            key=ROOT_KEY,
            at=at,
            attributes=attributes,
            is_error=failed,
            # A run whose end was never observed (the process stopped it) is incomplete.
            is_complete=bool(totals.status),
        )


def _guardrail_decision(deriver: SpanDeriver, event: Any, at: float) -> list[Signal]:
    """The guardrails' verdict on the turn's input: a span ending now that lasted the
    evaluation's latency, with the usage of the classifier call it may have made."""
    denied = bool(getattr(event, "denied", False))
    latency = max(float(getattr(event, "latency_ms", 0) or 0), 0.0) / 1000
    attributes: dict[str, Any] = {
        f"{attr.GUARDRAIL_PREFIX}triggered": denied,
        f"{attr.GUARDRAIL_PREFIX}mode": str(getattr(event, "mode", "")),
        f"{attr.GUARDRAIL_PREFIX}evaluators": str(getattr(event, "evaluators", "")),
        f"{attr.GUARDRAIL_PREFIX}rules": int(getattr(event, "rules", 0) or 0),
        f"{attr.GUARDRAIL_PREFIX}latency_ms": int(getattr(event, "latency_ms", 0) or 0),
    }
    if getattr(event, "reason", ""):
        attributes[f"{attr.GUARDRAIL_PREFIX}reason"] = str(event.reason)
    model = str(getattr(event, "model", "") or "")
    if model:
        usage = {
            attr.USAGE_INPUT_TOKENS: int(getattr(event, "input_tokens", 0) or 0),
            attr.USAGE_OUTPUT_TOKENS: int(getattr(event, "output_tokens", 0) or 0),
            attr.USAGE_CACHE_READ_INPUT_TOKENS: int(getattr(event, "cached_input_tokens", 0) or 0),
            attr.USAGE_REASONING_OUTPUT_TOKENS: int(getattr(event, "reasoning_tokens", 0) or 0),
        }
        attributes.update({attr.REQUEST_MODEL: model, **usage})
        totals = deriver._totals
        totals.input_tokens += usage[attr.USAGE_INPUT_TOKENS]
        totals.output_tokens += usage[attr.USAGE_OUTPUT_TOKENS]
        totals.cached_input_tokens += usage[attr.USAGE_CACHE_READ_INPUT_TOKENS]
        totals.reasoning_tokens += usage[attr.USAGE_REASONING_OUTPUT_TOKENS]
    if denied:
        attributes[attr.ERROR_TYPE] = "guardrail_denied"
    key = deriver.point_span_key("guardrail")
    opened = deriver.open_span(
        key,
        kind=KIND_GUARDRAIL,
        name=f"guardrail {getattr(event, 'name', '') or 'input'}",
        at=at - latency,
        parent_key=ROOT_KEY,
        attributes=attributes,
    )
    closed = deriver.close_span(key, at, is_error=denied)
    assert closed is not None
    return [opened, closed]


def _guardrail(deriver: SpanDeriver, event: Any, at: float) -> list[Signal]:
    """Any other ``guardrail*`` event: a decision, drawn as a span of no duration."""
    payload = event.to_payload() if hasattr(event, "to_payload") else dict(vars(event))
    name = str(payload.get("name") or payload.get("rule") or event.type)
    status = str(payload.get("status") or "").lower()
    triggered = bool(
        payload.get("triggered")
        or payload.get("denied")
        or payload.get("allowed") is False
        or status in {"denied", "blocked", "triggered", "rejected"}
    )
    attributes = {
        f"{attr.GUARDRAIL_PREFIX}{k}": v
        for k, v in payload.items()
        if isinstance(v, str | int | float | bool) and v is not None
    }
    attributes[f"{attr.GUARDRAIL_PREFIX}event"] = event.type
    attributes[f"{attr.GUARDRAIL_PREFIX}triggered"] = triggered
    key = deriver.point_span_key("guardrail")
    opened = deriver.open_span(
        key,
        kind=KIND_GUARDRAIL,
        name=f"guardrail {name}",
        at=at,
        parent_key=deriver.current_parent,
        attributes=attributes,
    )
    closed = deriver.close_span(key, at, is_error=triggered)
    assert closed is not None
    return [opened, closed]


def _request_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    names = {
        "max_tokens": attr.REQUEST_MAX_TOKENS,
        "temperature": attr.REQUEST_TEMPERATURE,
        "stop": attr.REQUEST_STOP_SEQUENCES,
        "tool_choice": attr.REQUEST_TOOL_CHOICE,
        "tools": attr.REQUEST_TOOLS_COUNT,
    }
    return {names.get(key, f"copilot.request.{key}"): value for key, value in parameters.items()}


def _tool_attributes(name: str, call_id: str) -> dict[str, Any]:
    return {
        attr.OPERATION_NAME: attr.OP_EXECUTE_TOOL,
        attr.TOOL_NAME: name,
        attr.TOOL_CALL_ID: call_id,
        attr.TOOL_TYPE: "function",
    }


def _parse_arguments(text: str) -> Any:
    if not text.strip():
        return {}
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return {"_raw": text}


def _parse_result(result: str) -> Any:
    """A tool's result: JSON when it is JSON, else the text."""
    try:
        return orjson.loads(result)
    except orjson.JSONDecodeError:
        return {"text": result}


for _event_type, _method in (
    ("generation_start", SpanDeriver._open_generation),
    ("generation_end", SpanDeriver._end_generation),
    ("action_start", SpanDeriver._action_start),
    ("action_args", SpanDeriver._action_args),
    ("action_end", SpanDeriver._action_end),
    ("action_result", SpanDeriver._action_result),
    ("reasoning_start", SpanDeriver._reasoning_start),
    ("reasoning_delta", SpanDeriver._reasoning_delta),
    ("reasoning_end", SpanDeriver._reasoning_end),
    ("agent_state", SpanDeriver._agent_state),
    ("meta_event", SpanDeriver._meta_event),
    ("limit_trip", SpanDeriver._limit_trip),
    ("run_error", SpanDeriver._run_error),
    ("run_finished", SpanDeriver._run_finished),
    ("guardrail_decision", _guardrail_decision),
):
    _RULES[_event_type] = _method
