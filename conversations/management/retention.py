"""Retention: a finished run's event log and spans are deleted once the run is old enough,
and the content blobs no kept span can refer to any more (``TraceBlob``).

Messages and agent states are kept: they are the conversation; the log and the spans are its
diagnostics. Safe while the server serves: runs still pending or running are never touched,
and rows go in small batches, each its own short transaction, walking old runs in creation
order through the run index (no table scan of events or spans).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

from django.db.models import Q, QuerySet
from django.utils import timezone

from conversations.models import Run, RunEvent, RunStatus, Span, ThreadStatus, TraceBlob
from conversations.store.spans import BLOB_TOUCH_EVERY

RUNS_PER_STEP = 200


@dataclass(slots=True)
class PurgeResult:
    runs: int = 0  # runs looked at
    run_events: int = 0
    spans: int = 0
    blobs: int = 0


def _delete_in_batches(
    rows: QuerySet[RunEvent] | QuerySet[Span] | QuerySet[TraceBlob], *, batch_size: int
) -> int:
    deleted = 0
    while True:
        pks = list(rows.values_list("pk", flat=True)[:batch_size])
        if not pks:
            return deleted
        count, _ = rows.model.objects.filter(pk__in=pks).delete()
        deleted += count
        if len(pks) < batch_size:
            return deleted


def traces_purge(
    *,
    older_than: dt.timedelta,
    batch_size: int = 5000,
    dry_run: bool = False,
    pause_seconds: float = 0.0,
    now: dt.datetime | None = None,
) -> PurgeResult:
    """Delete the run events and spans of finished runs created before ``now - older_than``
    (with ``dry_run``, only count them)."""
    cutoff = (now or timezone.now()) - older_than
    # An interrupted run whose thread still waits for the answer keeps its log: the pending
    # interrupt is read from it.
    old_runs = Run.objects.filter(status__in=Run.FINISHED_STATUSES, created_at__lt=cutoff).exclude(
        status=RunStatus.INTERRUPTED, thread__status=ThreadStatus.INTERRUPTED
    )
    result = PurgeResult()
    last: tuple[dt.datetime, str] | None = None
    while True:
        page = old_runs.order_by("created_at", "id")
        if last is not None:
            page = page.filter(Q(created_at__gt=last[0]) | Q(created_at=last[0], id__gt=last[1]))
        runs = list(page.values_list("created_at", "id")[:RUNS_PER_STEP])
        if not runs:
            _purge_blobs(result, cutoff=cutoff, batch_size=batch_size, dry_run=dry_run)
            return result
        last = runs[-1]
        run_ids = [run_id for _, run_id in runs]
        result.runs += len(run_ids)
        events = RunEvent.objects.filter(run_id__in=run_ids)
        spans = Span.objects.filter(run_id__in=run_ids)
        if dry_run:
            result.run_events += events.count()
            result.spans += spans.count()
        else:
            result.run_events += _delete_in_batches(events, batch_size=batch_size)
            result.spans += _delete_in_batches(spans, batch_size=batch_size)
            if pause_seconds:
                time.sleep(pause_seconds)  # let the serving load breathe between steps


def _purge_blobs(
    result: PurgeResult, *, cutoff: dt.datetime, batch_size: int, dry_run: bool
) -> None:
    """Blobs last used before any kept run began. A run that uses a blob moves its last use to
    its end unless it was moved within ``BLOB_TOUCH_EVERY``: a kept run (created after the
    cutoff) leaves its blobs used after ``cutoff - BLOB_TOUCH_EVERY``; twice that, for clocks."""
    unused = TraceBlob.objects.filter(last_used_at__lt=cutoff - 2 * BLOB_TOUCH_EVERY)
    if dry_run:
        result.blobs += unused.count()
    else:
        result.blobs += _delete_in_batches(unused, batch_size=batch_size)
