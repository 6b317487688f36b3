"""Celery tasks: thin wrappers around the engine's services."""

from __future__ import annotations

import asyncio

from celery import shared_task

from copilot_runtime.engine.executor import run_execute_stored
from copilot_runtime.engine.reaper import runs_reap_stale


@shared_task(name="copilot.execute_run", acks_late=True, reject_on_worker_lost=True)
def execute_run(run_id: str) -> str:
    """Execute one prepared run. A redelivered task finds the run started and does nothing."""
    return asyncio.run(run_execute_stored(run_id=run_id))


@shared_task(name="copilot.reap_stale_runs")
def reap_stale_runs() -> int:
    """Fail the runs whose executor stopped renewing its heartbeat (run it periodically)."""
    return runs_reap_stale()
