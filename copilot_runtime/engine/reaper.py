"""Ending runs whose executor died (a worker killed mid-turn): nothing hangs forever.

A running run's executor renews its heartbeat every ``HEARTBEAT_SECONDS``. A run whose heartbeat
is older than ``RUN_STALE_SECONDS`` is failed with ``WORKER_LOST``; its log gets a final error
and ``run_finished`` so followers end with ``MESSAGE_STREAM_INTERRUPTED``. Everything persisted
before the executor died stays. Called by followers that wait on a quiet run, by the periodic
Celery task and by ``manage.py reap_runs``.
"""

from __future__ import annotations

import datetime as dt

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from conversations.models import Run, RunEvent, RunStatus
from conversations.services.runs import LoggedEvent, Usage, run_finish
from copilot_runtime.conf import runtime_setting
from copilot_runtime.events import RunError, RunFinished

WORKER_LOST = "WORKER_LOST"
WORKER_LOST_MESSAGE = (
    "The process executing this run stopped responding; the run was ended. "
    "What was produced before is kept."
)


def _stale_before(now: dt.datetime) -> dt.datetime:
    return now - dt.timedelta(seconds=float(runtime_setting("RUN_STALE_SECONDS")))


@transaction.atomic
def _reap_one(run_id: str, stale_before: dt.datetime) -> list[LoggedEvent]:
    run = (
        Run.objects.select_for_update(skip_locked=True)
        .filter(pk=run_id, status=RunStatus.RUNNING)
        .filter(Q(heartbeat_at__lt=stale_before) | Q(heartbeat_at__isnull=True))
        .first()
    )
    if run is None:
        return []
    last = RunEvent.objects.filter(run=run).aggregate(last=Max("seq"))["last"] or 0
    error = RunError(message=WORKER_LOST_MESSAGE, code=WORKER_LOST)
    finished = RunFinished(status=str(RunStatus.FAILED))
    events = [
        LoggedEvent(seq=last + 1, type=error.type, payload=error.to_payload()),
        LoggedEvent(seq=last + 2, type=finished.type, payload=finished.to_payload()),
    ]
    RunEvent.objects.bulk_create(
        [RunEvent(run=run, seq=e.seq, type=e.type, payload=e.payload) for e in events]
    )
    run_finish(
        run_id=run.pk,
        status=RunStatus.FAILED,
        usage=Usage(),
        error_code=WORKER_LOST,
        error_details={"message": WORKER_LOST_MESSAGE},
    )
    return events


def runs_reap_stale(*, run_ids: list[str] | None = None, now: dt.datetime | None = None) -> int:
    """Fail the stale running runs (all, or those of ``run_ids``); returns how many."""
    stale_before = _stale_before(now or timezone.now())
    candidates = Run.objects.filter(status=RunStatus.RUNNING).filter(
        Q(heartbeat_at__lt=stale_before) | Q(heartbeat_at__isnull=True)
    )
    if run_ids is not None:
        candidates = candidates.filter(pk__in=run_ids)
    reaped = 0
    for run_id in list(candidates.values_list("pk", flat=True)[:500]):
        events = _reap_one(run_id, stale_before)
        if events:
            reaped += 1
            from copilot_runtime.engine.relay import announce_batch

            async_to_sync(announce_batch)(run_id, events)
    return reaped
