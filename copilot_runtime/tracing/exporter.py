"""Optional: the run's spans sent over OTLP/HTTP as well, to any OpenTelemetry backend.

On when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set and
the OpenTelemetry packages are installed (the ``otel`` extra); the exporter reads the standard
``OTEL_*`` variables itself (headers, timeout, ``OTEL_SERVICE_NAME``). Spans keep the ids they
have in Postgres, so a trace can be followed from the admin to the backend. Export runs on
the SDK's batch thread: it never holds up a run, and a backend that is down only costs a log
line.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Sequence
from typing import Any, Protocol

import orjson

from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing.records import SpanRecord
from copilot_runtime.tracing.signals import KIND_GENERATION, KIND_TOOL

logger = logging.getLogger(__name__)

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
DEFAULT_SERVICE_NAME = "copilot-runtime"
SCOPE_NAME = "copilot_runtime.tracing"


class TraceExport(Protocol):
    def export(self, *, trace_id: str, records: Sequence[SpanRecord]) -> None: ...


def _attribute_value(value: Any) -> Any:
    """OpenTelemetry attributes are scalars or lists of one scalar type; the rest is JSON."""
    if isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list | tuple) and value:
        kinds = {type(item) for item in value}
        if len(kinds) == 1 and kinds <= {str, bool, int, float}:
            return list(value)
    return orjson.dumps(value, default=str).decode()


def otlp_attributes(record: SpanRecord) -> dict[str, Any]:
    """The span's attributes for export, with its captured content under the GenAI names."""
    attributes = {
        key: _attribute_value(value)
        for key, value in record.attributes.items()
        if value is not None
    }
    attributes["copilot.span.kind"] = record.kind
    content: list[tuple[str, Any]] = []
    if record.kind == KIND_TOOL:
        content = [(attr.TOOL_CALL_ARGUMENTS, record.input), (attr.TOOL_CALL_RESULT, record.output)]
    elif record.kind == KIND_GENERATION:
        content = [(attr.OUTPUT_MESSAGES, record.output)]
    elif not record.parent_span_id:
        content = [(attr.INPUT_MESSAGES, record.input)]
    for name, value in content:
        if value is not None:
            attributes[name] = orjson.dumps(value, default=str).decode()
    return attributes


class OtlpTraceExport:
    """Hands finished spans to an OpenTelemetry span processor (batching, retries)."""

    def __init__(self, processor: Any, resource: Any) -> None:
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self._processor = processor
        self._resource = resource
        self._scope = InstrumentationScope(SCOPE_NAME)

    def export(self, *, trace_id: str, records: Sequence[SpanRecord]) -> None:
        for record in records:
            self._processor.on_end(self._readable(trace_id, record))

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._processor.force_flush(timeout_millis))

    def shutdown(self) -> None:
        self._processor.shutdown()

    def _readable(self, trace_id: str, record: SpanRecord) -> Any:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        def context(span_id: str) -> SpanContext:
            return SpanContext(
                trace_id=int(trace_id, 16),
                span_id=int(span_id, 16),
                is_remote=False,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )

        if record.is_error:
            message = record.attributes.get(attr.ERROR_MESSAGE) or record.attributes.get(
                attr.ERROR_TYPE
            )
            status = Status(StatusCode.ERROR, str(message) if message else None)
        else:
            status = Status(StatusCode.OK if record.is_complete else StatusCode.UNSET)
        ended_at = record.ended_at if record.ended_at is not None else record.started_at
        return ReadableSpan(
            name=record.name,
            context=context(record.span_id),
            parent=context(record.parent_span_id) if record.parent_span_id else None,
            resource=self._resource,
            attributes=otlp_attributes(record),
            kind=SpanKind.CLIENT if record.kind == KIND_GENERATION else SpanKind.INTERNAL,
            status=status,
            start_time=int(record.started_at * 1e9),
            end_time=int(ended_at * 1e9),
            instrumentation_scope=self._scope,
        )


def otlp_export_create(*, endpoint: str | None = None, **processor_options: Any) -> OtlpTraceExport:
    """An OTLP/HTTP export; ``endpoint`` is the full traces URL (default: from the
    environment). Raises ImportError without the OpenTelemetry packages."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporter = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
    resource = Resource.create(
        {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": DEFAULT_SERVICE_NAME}
    )
    return OtlpTraceExport(BatchSpanProcessor(exporter, **processor_options), resource)


@functools.cache
def otlp_export_from_environment() -> OtlpTraceExport | None:
    """The process's OTLP export, or None when no endpoint is configured (or the packages are
    missing: said once in the log)."""
    if not any(os.environ.get(name) for name in ENDPOINT_VARIABLES):
        return None
    try:
        return otlp_export_create()
    except ImportError:
        logger.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry packages are not "
            "installed (pip install 'copilot-runtime-django[otel]'); spans stay in Postgres only"
        )
        return None
