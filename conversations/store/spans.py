"""Writing a run's trace spans and cost through the ORM (the ORM store, and tests).

The spans arrive closed and priced (the tracer prices them before the run's last write), so
storing them is only rows; ``PgTurnStore`` writes the same columns in its own statement.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.utils import timezone

from conversations.models import Run, Span, TraceBlob
from conversations.store.types import SpanWrite

SPAN_BATCH_SIZE = 500
# A stored blob's last use is moved forward when it is older than this: retention keeps a
# blob used this long before the oldest run it keeps (conversations/management/retention.py).
BLOB_TOUCH_EVERY = dt.timedelta(hours=1)


def span_time(seconds: float | None) -> dt.datetime | None:
    """A span's start or end, kept by the tracer as epoch seconds."""
    if seconds is None:
        return None
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def run_span_times(trace: SpanWrite) -> tuple[dt.datetime | None, dt.datetime | None]:
    """When the run span began and ended: the run's own start and end, so that a run's
    duration and its run span's are one clock's (None, None: no closed run span)."""
    for record in trace.records:
        if not record.parent_span_id and record.ended_at is not None:
            return span_time(record.started_at), span_time(record.ended_at)
    return None, None


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
        if trace.persist_spans and trace.blobs:
            blobs_store(trace.blobs, now=timezone.now())
        started_at, finished_at = run_span_times(trace)
        times = {"started_at": started_at, "finished_at": finished_at} if finished_at else {}
        cost = {"cost": trace.cost} if trace.cost is not None else {}
        if times or cost:
            Run.objects.filter(pk=run_id).update(**times, **cost)


def blobs_store(blobs: dict[str, object], *, now: dt.datetime) -> None:
    """Store the content spans refer to by hash, once; mark the stored ones used now."""
    rows = [TraceBlob(sha256=key, content=value, last_used_at=now) for key, value in blobs.items()]
    TraceBlob.objects.bulk_create(rows, ignore_conflicts=True)
    stale = now - BLOB_TOUCH_EVERY
    TraceBlob.objects.filter(sha256__in=list(blobs), last_used_at__lt=stale).update(
        last_used_at=now
    )
