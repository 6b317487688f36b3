"""What the span deriver says: a span opened, closed, or annotated after it closed.

Signals carry times as Unix seconds (floats) given by the caller, so deriving spans from a
stream stays a pure function of the events and their times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Span kinds, as stored in ``conversations.models.SpanKind``.
KIND_RUN = "run"
KIND_AGENT = "agent"
KIND_GENERATION = "generation"
KIND_TOOL = "tool"
KIND_GUARDRAIL = "guardrail"
KIND_REASONING = "reasoning"


@dataclass(frozen=True, slots=True)
class SpanOpened:
    key: str
    kind: str
    name: str
    parent_key: str | None
    at: float
    input: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpanClosed:
    key: str
    at: float
    output: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)
    # None: nobody said (a span closed by the end of the run, a tool without a status).
    is_error: bool | None = None
    # False: the span was still open when the run ended, and was closed by the flush.
    is_complete: bool = True


@dataclass(frozen=True, slots=True)
class SpanAnnotated:
    """More about a span that may already be closed (e.g. the error that followed a model
    call's end). Attributes are merged; ``is_error`` replaces the span's when not None."""

    key: str
    attributes: dict[str, Any] = field(default_factory=dict)
    is_error: bool | None = None


Signal = SpanOpened | SpanClosed | SpanAnnotated
