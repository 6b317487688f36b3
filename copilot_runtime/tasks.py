"""Celery tasks: thin wrappers around the engine's services (found by the site's Celery app,
the standalone one or a host project's, with ``autodiscover_tasks()``)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from celery import shared_task
from celery.signals import worker_process_init

from copilot_runtime.collector import settle_collector
from copilot_runtime.engine.executor import EXECUTE_RUN_TASK, run_execute_stored
from copilot_runtime.engine.reaper import runs_reap_stale

# One event loop per worker process, kept across tasks: the model client's connection pool and
# TLS context, the channel layer's connections and the run thread live on it, and building
# them anew for every run (asyncio.run) cost tens of milliseconds per run.
_LOOP: asyncio.AbstractEventLoop | None = None


# A pool process is long-lived too: the same collector settings as a web process
# (collector.py), once the worker has loaded the apps and the tasks.
worker_process_init.connect(lambda **_: settle_collector(), weak=False)


def _run_on_process_loop(coroutine: Coroutine[Any, Any, str]) -> str:
    global _LOOP
    if _LOOP is None or _LOOP.is_closed():
        _LOOP = asyncio.new_event_loop()
    return _LOOP.run_until_complete(coroutine)


@shared_task(name=EXECUTE_RUN_TASK, acks_late=True, reject_on_worker_lost=True)
def execute_run(run_id: str, placement: dict[str, Any] | None = None) -> str:
    """Execute one prepared run. A redelivered task finds the run started and does nothing."""
    return _run_on_process_loop(run_execute_stored(run_id=run_id, placement=placement))


@shared_task(name="copilot.reap_stale_runs")
def reap_stale_runs() -> int:
    """Fail the runs whose executor stopped renewing its heartbeat (run it periodically)."""
    return runs_reap_stale()
