"""Writing a run's trace spans and cost through the ORM (the ORM store, and tests).

The spans arrive closed and priced (the tracer prices them before the run's last write), so
storing them is only rows; ``PgTurnStore`` writes the same columns in its own statement.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction

from conversations.models import Run, Span
from conversations.store.types import SpanWrite

SPAN_BATCH_SIZE = 500


def span_time(seconds: float | None) -> dt.datetime | None:
    """A span's start or end, kept by the tracer as epoch seconds."""
    if seconds is None:
        return None
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def spans_store(*, run_id: str, trace: SpanWrite) -> None:
    """Store the run's spans (when ``trace.persist_spans``) and its cost, in one transaction."""
    with transaction.atomic():
        if trace.persist_spans and trace.records:
            Span.objects.bulk_create(
                [
                    Span(
                        trace_id=trace.trace_id,
                        span_id=record.span_id,
                        parent_span_id=record.parent_span_id,
                        run_id=run_id,
                        kind=record.kind,
                        name=record.name[:255],
                        input=record.input,
                        output=record.output,
                        attributes=record.attributes,
                        is_error=record.is_error,
                        is_complete=record.is_complete,
                        started_at=span_time(record.started_at),
                        ended_at=span_time(record.ended_at),
                    )
                    for record in trace.records
                ],
                batch_size=SPAN_BATCH_SIZE,
            )
        if trace.cost is not None:
            Run.objects.filter(pk=run_id).update(cost=trace.cost)
