"""A worker process's run loop: one event loop, on a thread of its own, for every run the
process executes.

Kept across tasks: the model client's connection pool and TLS context, the channel layer's
connections and the turn store's pools live on the loop, and building them anew for every run
(``asyncio.run``) cost tens of milliseconds per run.

Runs reach the loop two ways: a task's thread hands its coroutine over and waits for it
(``run_on_process_loop``: the prefork pool's children, a task applied in process), or the
consumer starts it and moves on (``start_on_process_loop``: the threads pool, see
copilot_runtime/fastlane/celery.py). Started runs are waited for when the process exits, before
the loop's connections close.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from copilot_runtime.runs.executor import task_time_limit_seconds
from copilot_runtime.runs.resources import close_turn_resources

logger = logging.getLogger(__name__)
Result = TypeVar("Result")

LOOP_THREAD_NAME = "copilot-runs"
# How long a stopping worker waits for its loop to close its connections.
CLOSE_TIMEOUT_SECONDS = 5.0

_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()
# The runs the consumer started and nobody waits for (added on the consumer's thread, removed
# on the loop's: a set's add and discard each hold the GIL throughout).
_STARTED: set[concurrent.futures.Future[Any]] = set()


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed, as uvicorn's web processes run: the worker's loop
    carries every run's model stream, database writes and announcements, and asyncio's own
    loop cost a tenth more of the worker's CPU per run (celery shape, C=50)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def process_loop() -> asyncio.AbstractEventLoop:
    """The process's run loop, started on first use."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.is_closed():
            loop = new_loop()
            threading.Thread(target=loop.run_forever, name=LOOP_THREAD_NAME, daemon=True).start()
            _LOOP = loop
            # At the process's exit, after Celery has waited for its pool: worker_shutdown
            # comes too early for that (with the threads pool it is sent from the signal
            # handler while runs still stream). A prefork child leaves with os._exit, its
            # connections dropped as before.
            atexit.register(close_process_loop)
        return _LOOP


def run_on_process_loop(coroutine: Coroutine[Any, Any, Result]) -> Result:
    """Run ``coroutine`` on the process's loop; the calling (task) thread waits for it."""
    return asyncio.run_coroutine_threadsafe(coroutine, process_loop()).result()


def start_on_process_loop(
    coroutine: Coroutine[Any, Any, Result],
) -> concurrent.futures.Future[Result]:
    """Start ``coroutine`` on the process's loop and return at once; the process waits for it
    before it exits (``close_process_loop``)."""
    future = asyncio.run_coroutine_threadsafe(coroutine, process_loop())
    _STARTED.add(future)
    future.add_done_callback(_STARTED.discard)
    return future


def close_process_loop() -> None:
    """The process is exiting: let the runs it started end (a warm shutdown, as Celery's pool
    waits for its tasks), then close the connections the loop opened (database pools, the
    model's HTTP pool) and stop it."""
    global _LOOP
    started = list(_STARTED)
    if started:
        # Bounded as Celery's hard time limit bounds a pool's task: each run ends itself
        # before it.
        logger.info("waiting for %d run task(s) to end before exiting", len(started))
        _, pending = concurrent.futures.wait(started, timeout=task_time_limit_seconds())
        if pending:
            logger.warning("exiting with %d run task(s) still executing", len(pending))
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
