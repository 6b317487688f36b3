"""Spans as the tracer builds them from signals, before they are stored and exported."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any

from copilot_runtime.tracing.signals import Signal, SpanAnnotated, SpanClosed, SpanOpened


@dataclass(slots=True)
class SpanRecord:
    key: str
    span_id: str
    parent_span_id: str
    kind: str
    name: str
    started_at: float  # Unix seconds
    ended_at: float | None = None
    input: Any = None
    output: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)
    is_error: bool | None = None
    is_complete: bool = False

    @property
    def duration_ms(self) -> float | None:
        if self.ended_at is None:
            return None
        return (self.ended_at - self.started_at) * 1000


def trace_id_for_run(run_id: str) -> str:
    """One trace per run, named after the run (32 hex digits, as OpenTelemetry's), so the
    same run can be found in Postgres and in an exported backend."""
    return hashlib.sha256(run_id.encode()).hexdigest()[:32]


def new_span_id() -> str:
    return secrets.token_hex(8)


class SpanBook:
    """The spans of one run, kept in memory from their opening to the end of the run."""

    def __init__(self) -> None:
        self._by_key: dict[str, SpanRecord] = {}
        self._all: list[SpanRecord] = []

    def apply(self, signals: list[Signal] | tuple[Signal, ...]) -> None:
        for signal in signals:
            if type(signal) is SpanOpened:
                parent = self._by_key.get(signal.parent_key) if signal.parent_key else None
                record = SpanRecord(
                    key=signal.key,
                    span_id=new_span_id(),
                    parent_span_id=parent.span_id if parent is not None else "",
                    kind=signal.kind,
                    name=signal.name,
                    started_at=signal.at,
                    input=signal.input,
                    attributes=dict(signal.attributes),
                )
                # A key opened twice (which the deriver avoids) leaves the first span as it is.
                self._by_key[signal.key] = record
                self._all.append(record)
            elif type(signal) is SpanClosed:
                record = self._by_key.get(signal.key)
                if record is None or record.ended_at is not None:
                    continue
                record.ended_at = signal.at
                record.output = signal.output
                record.attributes.update(signal.attributes)
                record.is_error = signal.is_error
                record.is_complete = signal.is_complete
            elif type(signal) is SpanAnnotated:
                record = self._by_key.get(signal.key)
                if record is None:
                    continue
                record.attributes.update(signal.attributes)
                if signal.is_error is not None:
                    record.is_error = signal.is_error

    @property
    def records(self) -> list[SpanRecord]:
        return list(self._all)
