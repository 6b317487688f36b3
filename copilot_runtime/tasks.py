"""Celery tasks: thin wrappers around the engine's services (found by the site's Celery app,
the standalone one or a host project's, with ``autodiscover_tasks()``).

A worker process keeps one event loop, on a thread of its own (copilot_runtime/runs/worker_loop.py),
and executes every run on it. A task carries one run (``execute_run``) or several that a web
process queued together (``execute_runs``: they execute at once). With the threads pool (``-P
threads -c N``, the standalone site's default) the consumer starts a task's runs on that loop
itself, up to N tasks at once, interleaved while each waits on the model
(copilot_runtime/fastlane/celery.py); with the prefork pool each child process executes one
task's runs at a time, its task thread waiting for them.

A web process of this version may queue ``execute_runs``: upgrade the workers before the web
processes (a worker of an earlier version does not know the task, and drops it).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from celery import Task, shared_task
from celery.app.task import Context
from celery.concurrency.thread import TaskPool as ThreadTaskPool
from celery.signals import worker_process_init, worker_ready

from copilot_runtime.collector import settle_collector
from copilot_runtime.runs.executor import (
    EXECUTE_RUN_TASK,
    EXECUTE_RUNS_TASK,
    run_execute_stored,
    runs_execute_stored,
)
from copilot_runtime.runs.reaper import runs_reap_stale
from copilot_runtime.runs.worker_loop import run_on_process_loop, start_on_process_loop
from copilot_runtime.runs.worker_recovery import keep_deliveries_through_reconnects

# With the threads pool a run is acknowledged from another thread than the consumer's (the
# run loop's, once the run ends), which Celery's consumer loop does not notice until its poll
# times out (a second): with every slot taken, a finished run's slot stayed unused that long,
# and 50 conversations on an 8-slot worker got 4 runs a second instead of 94
# (celery/celery#6941). A short repeating timer bounds that poll.
CONSUMER_TICK_SECONDS = 0.01
# The run tasks' way from the consumer to the run loop (copilot_runtime/fastlane/celery.py).
RUN_TASK_STRATEGY = "copilot_runtime.fastlane.celery:on_the_run_loop"


def _settle_pool_process(**_: Any) -> None:
    # A pool process is long-lived too: the same collector settings as a web process
    # (collector.py), once the worker has loaded the apps and the tasks.
    settle_collector()


def _on_worker_ready(sender: Any, **_: Any) -> None:
    """The consumer is running. A threads-pool worker executes runs in this very process,
    which no ``worker_process_init`` announces: settle it here, and keep its consumer awake."""
    if isinstance(getattr(sender, "pool", None), ThreadTaskPool):
        settle_collector()
        sender.timer.call_repeatedly(CONSUMER_TICK_SECONDS, _wake_consumer)


def _wake_consumer() -> None:
    """Nothing: the timer firing is what ends the consumer loop's poll."""


worker_process_init.connect(_settle_pool_process, weak=False)
worker_ready.connect(_on_worker_ready, weak=False)
# A lost broker connection leaves the runs in flight their messages, acknowledged when they end
# on the next connection (copilot_runtime/runs/worker_recovery.py: Celery 5.7 with kombu's Redis
# transport stopped the worker instead).
worker_ready.connect(keep_deliveries_through_reconnects, weak=False)


def execute_run_coroutine(
    run_id: str, placement: dict[str, Any] | None = None, *, first_delivery: bool
) -> Coroutine[Any, Any, str]:
    """``execute_run``'s work, given its arguments and whether this is a first delivery."""
    return run_execute_stored(run_id=run_id, placement=placement, first_delivery=first_delivery)


def execute_runs_coroutine(
    runs: list[list[Any]], *, first_delivery: bool
) -> Coroutine[Any, Any, list[str]]:
    """``execute_runs``'s work, as ``execute_run_coroutine``."""
    return runs_execute_stored(
        runs=[(run_id, placement) for run_id, placement in runs], first_delivery=first_delivery
    )


@shared_task(
    bind=True,
    name=EXECUTE_RUN_TASK,
    acks_late=True,
    reject_on_worker_lost=True,
    Strategy=RUN_TASK_STRATEGY,
    coroutine=staticmethod(execute_run_coroutine),
    start_on_loop=staticmethod(start_on_process_loop),
)
def execute_run(self: Task, run_id: str, placement: dict[str, Any] | None = None) -> str:
    """Execute one prepared run. A task delivered again finds its run claimed and stores
    nothing (asking the model first only when the broker took it for a first delivery)."""
    return run_on_process_loop(
        execute_run_coroutine(run_id, placement, first_delivery=first_delivery(self.request))
    )


@shared_task(
    bind=True,
    name=EXECUTE_RUNS_TASK,
    acks_late=True,
    reject_on_worker_lost=True,
    Strategy=RUN_TASK_STRATEGY,
    coroutine=staticmethod(execute_runs_coroutine),
    start_on_loop=staticmethod(start_on_process_loop),
)
def execute_runs(self: Task, runs: list[list[Any]]) -> list[str]:
    """Execute several prepared runs at once, each as ``execute_run`` would (``runs``: [run id,
    placement] pairs). The task is acknowledged once all have ended; delivered again, each
    run finds itself claimed and stores nothing."""
    return run_on_process_loop(
        execute_runs_coroutine(runs, first_delivery=first_delivery(self.request))
    )


def first_delivery(request: Context) -> bool:
    """Whether the broker delivers the task for the first time. Brokers flag a message they
    deliver again: RabbitMQ itself, kombu's Redis transport when it restores a message that a
    lost or stopping worker had not acknowledged. A task applied locally (``apply``) has no
    such flag and counts as a redelivery, as does anything else without one."""
    return (request.delivery_info or {}).get("redelivered") is False


@shared_task(name="copilot.reap_stale_runs")
def reap_stale_runs() -> int:
    """Fail the runs whose executor stopped renewing its heartbeat (run it periodically)."""
    return runs_reap_stale()
