"""Celery tasks: thin wrappers around the engine's services (found by the site's Celery app,
the standalone one or a host project's, with ``autodiscover_tasks()``).

A worker process keeps one event loop, on a thread of its own, and every run task hands its
runs to it and waits. A task carries one run (``execute_run``) or several that a web process
queued together (``execute_runs``: they execute at once). With the threads pool (``-P threads
-c N``, the standalone site's default) one process therefore executes the runs of up to N
tasks at once, interleaved on that loop while each waits on the model; with the prefork pool
each child process executes one task's runs at a time.

A web process of this version may queue ``execute_runs``: upgrade the workers before the web
processes (a worker of an earlier version does not know the task, and drops it).
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from celery import Task, shared_task
from celery.app.task import Context
from celery.concurrency.thread import TaskPool as ThreadTaskPool
from celery.signals import worker_process_init, worker_ready

from copilot_runtime.collector import settle_collector
from copilot_runtime.engine.executor import (
    EXECUTE_RUN_TASK,
    EXECUTE_RUNS_TASK,
    run_execute_stored,
    runs_execute_stored,
)
from copilot_runtime.engine.reaper import runs_reap_stale
from copilot_runtime.lifespan import close_turn_resources

logger = logging.getLogger(__name__)
Result = TypeVar("Result")

# Kept across tasks: the model client's connection pool and TLS context, the channel layer's
# connections and the turn store's pools live on the loop, and building them anew for every
# run (asyncio.run) cost tens of milliseconds per run.
_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()

# With the threads pool a run is acknowledged from its task's thread, which Celery's consumer
# loop does not notice until its poll times out (a second): with every slot taken, a finished
# run's slot stayed unused that long, and 50 conversations on an 8-slot worker got 4 runs a
# second instead of 94 (celery/celery#6941). A short repeating timer bounds that poll.
CONSUMER_TICK_SECONDS = 0.01
# How long a stopping worker waits for its loop to close its connections.
CLOSE_TIMEOUT_SECONDS = 5.0


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed, as uvicorn's web processes run: the worker's loop
    carries every run's model stream, database writes and announcements, and asyncio's own
    loop cost a tenth more of the worker's CPU per run (celery shape, C=50)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _process_loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.is_closed():
            loop = _new_loop()
            threading.Thread(target=loop.run_forever, name="copilot-runs", daemon=True).start()
            _LOOP = loop
            # At the process's exit, after Celery has waited for its runs: worker_shutdown
            # comes too early for that (with the threads pool it is sent from the signal
            # handler while runs still stream). A prefork child leaves with os._exit, its
            # connections dropped as before.
            atexit.register(_close_process_loop)
        return _LOOP


def _run_on_process_loop(coroutine: Coroutine[Any, Any, Result]) -> Result:
    """Run ``coroutine`` on the process's loop; the calling (task) thread waits for it."""
    return asyncio.run_coroutine_threadsafe(coroutine, _process_loop()).result()


def _close_process_loop() -> None:
    """The process is exiting (its runs have ended): close the connections the loop opened
    (database pools, the model's HTTP pool) and stop it."""
    global _LOOP
    with _LOOP_LOCK:
        loop, _LOOP = _LOOP, None
    if loop is None or loop.is_closed():
        return
    try:
        asyncio.run_coroutine_threadsafe(close_turn_resources(), loop).result(CLOSE_TIMEOUT_SECONDS)
    except TimeoutError:
        logger.warning("closing the run loop's connections took over %ss", CLOSE_TIMEOUT_SECONDS)
    finally:
        loop.call_soon_threadsafe(loop.stop)


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


@shared_task(bind=True, name=EXECUTE_RUN_TASK, acks_late=True, reject_on_worker_lost=True)
def execute_run(self: Task, run_id: str, placement: dict[str, Any] | None = None) -> str:
    """Execute one prepared run. A task delivered again finds its run claimed and stores
    nothing (asking the model first only when the broker took it for a first delivery)."""
    return _run_on_process_loop(
        run_execute_stored(
            run_id=run_id, placement=placement, first_delivery=first_delivery(self.request)
        )
    )


@shared_task(bind=True, name=EXECUTE_RUNS_TASK, acks_late=True, reject_on_worker_lost=True)
def execute_runs(self: Task, runs: list[list[Any]]) -> list[str]:
    """Execute several prepared runs at once, each as ``execute_run`` would (``runs``: [run id,
    placement] pairs). The task is acknowledged once all have ended; delivered again, each
    run finds itself claimed and stores nothing."""
    return _run_on_process_loop(
        runs_execute_stored(
            runs=[(run_id, placement) for run_id, placement in runs],
            first_delivery=first_delivery(self.request),
        )
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
