"""The state of one run's span tree as its events are derived: the spans open, the model call
in progress, the tool calls whose arguments are streaming, the run's totals; and how a span
opens and closes (the signals ``SpanOpened`` and ``SpanClosed``).

``SpanTree`` is what the rules (``span_rules.py``) read and change; ``SpanDeriver``
(``deriver.py``) drives it from the events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing.content import ContentBook, Redact, keep_as_is
from copilot_runtime.tracing.signals import KIND_RUN, SpanClosed, SpanOpened

# The run span's key: every other span is under it.
ROOT_KEY = "run"
# What a span closed by the run's end (``flush``), not by an event of its own, says of it.
CLOSED_BY_RUN_END = "run_end"


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
    # The stored messages the request carried (``content.history_reference``), when content
    # is captured: what each model call's input refers to.
    history: dict[str, Any] | None = None


@dataclass(slots=True)
class Generation:
    """The model call in progress."""

    key: str
    model: str
    started_at: float
    first_chunk_at: float | None = None
    text: list[str] = field(default_factory=list)  # its text, when content is captured
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # likewise


@dataclass(slots=True)
class PendingTool:
    """A tool call whose arguments are streaming (its span opens when they are complete)."""

    name: str
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class RunTotals:
    """What the run span says at its end, summed over the run's events."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    reasoning_tokens: int = 0
    generations: int = 0
    tool_calls: int = 0
    state_snapshots: int = 0
    limit_trips: list[str] = field(default_factory=list)
    interrupts: list[str] = field(default_factory=list)
    error_code: str = ""
    error_message: str = ""
    status: str = ""


class SpanTree:
    """One run's spans as far as its events went."""

    def __init__(
        self, root: RunSpanSpec, *, capture_content: bool = False, redact: Redact = keep_as_is
    ) -> None:
        self.root = root
        self.capture_content = capture_content
        self.content = ContentBook(redact)
        self.open_spans: dict[str, str] = {}  # key -> kind, in opening order
        self.generation: Generation | None = None
        self.generation_count = 0
        # The model call that just failed, until the run's error says why (``run_error``).
        self.last_failed_generation: str | None = None
        self.pending_tools: dict[str, PendingTool] = {}  # by tool call id
        self.reasoning_text: dict[str, list[str]] = {}  # by reasoning span key
        self.point_spans = 0
        self.totals = RunTotals()

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
        self.open_spans[key] = kind
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
        if key not in self.open_spans:
            return None
        return self.end_span(key, at, output=output, attributes=attributes, is_error=is_error)

    def end_span(
        self,
        key: str,
        at: float,
        *,
        output: Any = None,
        attributes: dict[str, Any] | None = None,
        is_error: bool | None = None,
        incomplete: bool = False,
    ) -> SpanClosed:
        """Close ``key``, which is open; ``incomplete``: closed by the run's end. ``output``
        is dropped unless content is captured, and redacted when it is."""
        del self.open_spans[key]
        attributes = dict(attributes or {})
        if incomplete:
            attributes[attr.CLOSED_BY] = CLOSED_BY_RUN_END
        if self.capture_content and output is not None:
            output = self.content.redact(output)
        return SpanClosed(
            key=key,
            at=at,
            output=output if self.capture_content else None,
            attributes=attributes,
            is_error=is_error,
            is_complete=not incomplete,
        )

    def point_span_key(self, prefix: str) -> str:
        """A fresh key for a span that opens and closes at once."""
        self.point_spans += 1
        return f"{prefix}:{self.point_spans}"

    @property
    def current_parent(self) -> str:
        """Where a span that belongs to the current model call goes."""
        return self.generation.key if self.generation is not None else ROOT_KEY

    def close_generation(
        self,
        at: float,
        *,
        attributes: dict[str, Any] | None = None,
        is_error: bool | None = None,
        incomplete: bool = False,
    ) -> SpanClosed:
        """Close the model call in progress, with its time to first chunk, ``attributes``
        (from its end, when it reported one) and, when captured, its answer."""
        generation = self.generation
        assert generation is not None
        self.generation = None
        closing: dict[str, Any] = {}
        if generation.first_chunk_at is not None:
            ttfc = generation.first_chunk_at - generation.started_at
            closing[attr.RESPONSE_TIME_TO_FIRST_CHUNK] = round(ttfc, 6)
        if attributes:
            closing.update(attributes)
        output = None
        if self.capture_content and (generation.text or generation.tool_calls):
            output = {"role": "assistant", "content": "".join(generation.text) or None}
            if generation.tool_calls:
                output["tool_calls"] = generation.tool_calls
        return self.end_span(
            generation.key,
            at,
            output=output,
            attributes=closing,
            is_error=is_error,
            incomplete=incomplete,
        )

    def reasoning_output(self, key: str) -> Any:
        """A reasoning span's output: its text, when any was captured."""
        text = "".join(self.reasoning_text.get(key) or [])
        return {"text": text} if text else None

    def close_root(self, at: float) -> SpanClosed:
        """Close the run span with the run's totals; complete only when its end was seen."""
        totals = self.totals
        attributes: dict[str, Any] = {
            attr.USAGE_INPUT_TOKENS: totals.input_tokens,
            attr.USAGE_OUTPUT_TOKENS: totals.output_tokens,
            attr.USAGE_CACHE_READ_INPUT_TOKENS: totals.cached_input_tokens,
            attr.USAGE_CACHE_CREATION_INPUT_TOKENS: totals.cache_write_input_tokens,
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
        del self.open_spans[ROOT_KEY]
        return SpanClosed(
            key=ROOT_KEY,
            at=at,
            attributes=attributes,
            is_error=failed,
            # A run whose end was never observed (the process stopped it) is incomplete.
            is_complete=bool(totals.status),
        )
