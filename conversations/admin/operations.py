"""What the inspector's buttons do: stop a run, clear a thread's pending interrupt."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from conversations.models import Run, RunStatus, Thread, ThreadStatus
from conversations.signals import run_stop_requested

INTERRUPT_CLEARED_CODE = "INTERRUPT_CLEARED"


def run_stop(*, run_id: str) -> bool:
    """Stop a running (or pending) run wherever it executes; False when it already ended (or
    nothing in this process can stop runs: the runtime's app is not installed)."""
    responses = run_stop_requested.send(sender=Run, run_id=run_id)
    return any(bool(stopped) for _, stopped in responses)


def thread_has_pending_interrupt(thread: Thread) -> bool:
    """A thread waits on an interrupt when its latest run ended ``interrupted`` (the run's
    log holds the interrupt, see ``conversations.selectors.thread_pending_interrupt``)."""
    return thread.status == ThreadStatus.INTERRUPTED


@transaction.atomic
def thread_clear_interrupt(*, thread_pk: int, cleared_by: str = "") -> bool:
    """Drop the thread's pending interrupt, so its next request starts a fresh turn instead of
    answering it. The interrupted run is ended as cancelled (``INTERRUPT_CLEARED``): it will
    never be resumed. False when the thread waited on nothing."""
    thread = Thread.objects.select_for_update().get(pk=thread_pk)
    if not thread_has_pending_interrupt(thread):
        return False
    now = timezone.now()
    latest = (
        Run.objects.filter(thread=thread, status__in=Run.FINISHED_STATUSES)
        .order_by("-created_at")
        .only("id", "status")
        .first()
    )
    if latest is not None and latest.status == RunStatus.INTERRUPTED:
        who = f" by {cleared_by}" if cleared_by else ""
        Run.objects.filter(pk=latest.pk).update(
            status=RunStatus.CANCELLED,
            error_code=INTERRUPT_CLEARED_CODE,
            error_details={"message": f"The pending interrupt was cleared in the admin{who}."},
        )
    Thread.objects.filter(pk=thread.pk).update(status=ThreadStatus.IDLE, updated_at=now)
    return True
