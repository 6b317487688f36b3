"""Ending runs whose executor died (a worker killed mid-turn) or never came: nothing hangs.

A running run's executor renews its heartbeat every ``HEARTBEAT_SECONDS``. A run whose heartbeat
is older than ``RUN_STALE_SECONDS`` (three missed heartbeats and a margin by default, so a long
GC pause is not a death) is failed with ``WORKER_LOST``; a run still ``pending`` after
``PENDING_TIMEOUT_SECONDS`` (no worker took it: none running, or the broker lost it) is failed
with ``RUN_NOT_STARTED``. Its log gets a final error and ``run_finished``, so followers end
with a clear error. Everything persisted before stays, and the partial assistant message or
tool call the log holds is stored, marked failed, as a cancelled run's is. Called by followers
that wait on a quiet run, by the next request on the thread, by the periodic Celery task and by
``manage.py reap_runs``.
"""

from __future__ import annotations

import contextlib
import datetime as dt

from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from conversations.models import Run, RunEvent, RunStatus
from conversations.services.messages import OutputMessage, messages_store_output
from conversations.services.runs import WORKER_LOST_CODE, LoggedEvent, Usage, run_finish
from copilot_runtime.conf import runtime_setting
from copilot_runtime.events import RunError, RunFinished, event_from_payload
from copilot_runtime.runs.recorder import RunRecorder

WORKER_LOST = WORKER_LOST_CODE
WORKER_LOST_MESSAGE = (
    "The process executing this run stopped responding; the run was ended. "
    "What was produced before is kept."
)
RUN_NOT_STARTED = "RUN_NOT_STARTED"
RUN_NOT_STARTED_MESSAGE = (
    "No worker started this run in time (is a Celery worker running?); the run was ended."
)


def _stale_before(now: dt.datetime) -> dt.datetime:
    return now - dt.timedelta(seconds=float(runtime_setting("RUN_STALE_SECONDS")))


def _unstarted_before(now: dt.datetime) -> dt.datetime:
    return now - dt.timedelta(seconds=float(runtime_setting("PENDING_TIMEOUT_SECONDS")))


def _dead(now: dt.datetime) -> Q:
    stale = Q(status=RunStatus.RUNNING) & (
        Q(heartbeat_at__lt=_stale_before(now)) | Q(heartbeat_at__isnull=True)
    )
    unstarted = Q(status=RunStatus.PENDING, created_at__lt=_unstarted_before(now))
    return stale | unstarted


def _partial_output(run_id: str, reason: str) -> list[OutputMessage]:
    """What the log holds of messages the run never finished, marked failed with ``reason``."""
    recorder = RunRecorder(run_id=run_id, thread_id="", agent_name="")
    for row in RunEvent.objects.filter(run_id=run_id).order_by("seq").iterator():
        with contextlib.suppress(Exception):  # an entry this version cannot read is skipped
            recorder.observe(event_from_payload(row.type, row.payload))
    recorder.take_batch()  # finished messages were stored by the executor already
    recorder.close_open_messages(reason=reason)
    return recorder.take_batch().messages


@transaction.atomic
def _reap_one(run_id: str, now: dt.datetime) -> list[LoggedEvent]:
    run = Run.objects.select_for_update(skip_locked=True).filter(Q(pk=run_id) & _dead(now)).first()
    if run is None:
        return []
    last = RunEvent.objects.filter(run=run).aggregate(last=Max("seq"))["last"] or 0
    if run.status == RunStatus.PENDING:
        code, message = RUN_NOT_STARTED, RUN_NOT_STARTED_MESSAGE
    else:
        code, message = WORKER_LOST, WORKER_LOST_MESSAGE
        partial = _partial_output(run.pk, WORKER_LOST_MESSAGE)
        if partial:
            messages_store_output(run=run, messages=partial)
    error = RunError(message=message, code=code)
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
        error_code=code,
        error_details={"message": message},
    )
    return events


def runs_reap_stale(*, run_ids: list[str] | None = None, now: dt.datetime | None = None) -> int:
    """Fail the dead runs (all, or those of ``run_ids``): running ones whose heartbeat is
    stale, pending ones no worker started in time. Returns how many."""
    now = now or timezone.now()
    candidates = Run.objects.filter(_dead(now))
    if run_ids is not None:
        candidates = candidates.filter(pk__in=run_ids)
    reaped = 0
    for run_id in list(candidates.values_list("pk", flat=True)[:500]):
        events = _reap_one(run_id, now)
        if events:
            reaped += 1
            from copilot_runtime.runs.relay import announce_batch

            async_to_sync(announce_batch)(run_id, events)
    return reaped
