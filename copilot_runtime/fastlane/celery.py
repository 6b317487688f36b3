"""The Celery lane: the run tasks' way from a worker's consumer to the run loop (Celery's
``Task.Strategy``).

Celery's default strategy makes each task message a ``Request``, which the threads pool runs
on one of its threads; the run task's thread then hands its runs to the process's run loop and
waits for them. Under load the pool's threads and the default strategy's handler held a
visible share of the worker's GIL time, and every turn's hop crossed one more thread. With the
threads pool this strategy starts the
task's coroutine on the run loop from the consumer itself and acknowledges the message when it
ends, failed or not, as ``acks_late`` does. Any other pool gets Celery's default strategy: a
prefork child executes its runs as before.

What a run task started this way does not get from Celery: task signals (``task_received``,
``task_prerun`` and the rest), task events (``-E``), a stored result (the site ignores them),
``--autoscale`` and ``celery inspect active`` (the pool never sees the task). A task applied
with a countdown or an expiry (the runtime sends neither) goes Celery's way. It keeps the
worker's log lines (received, succeeded in, raised), the concurrency bound (``-c N``: up to N
tasks execute at once), revocation (a revoked task is acknowledged and not run) and the warm
shutdown (the process waits for the runs it started: copilot_runtime/runs/worker_loop.py). It
drops the
task's rate limit (the runtime sets none) and the worker's reserved-task bookkeeping
(``celery inspect reserved``, ``worker_state.reserved_requests``), and it logs with the
tracer's own message formats (``celery.app.trace``'s ``LOG_*``). Only the runtime's run tasks
take it; the host's own tasks keep Celery's strategy. With the lane closed (an untested Celery,
``FAST_LANE`` off) the run tasks take Celery's default strategy too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from celery.app import trace
from celery.concurrency.thread import TaskPool as ThreadTaskPool
from celery.worker import state as worker_state
from celery.worker.strategy import default
from kombu.message import Message

from copilot_runtime.fastlane import lane_open

# Celery's own loggers for these lines, so a site's logging settings treat them alike.
received_logger = logging.getLogger("celery.worker.strategy")
trace_logger = logging.getLogger("celery.app.trace")

Handler = Callable[..., Any]


def on_the_run_loop(task: Any, app: Any, consumer: Any, **options: Any) -> Handler:
    """The message handler of ``task`` (a run task: its ``coroutine`` makes its work from the
    message's arguments, its ``start_on_loop`` starts that work on the process's run loop and
    returns its future) for ``consumer``'s worker."""
    pool = consumer.pool
    if not isinstance(pool, ThreadTaskPool) or not lane_open("celery"):
        return default(task, app, consumer, **options)
    name: str = task.name
    coroutine_for: Callable[..., Coroutine[Any, Any, Any]] = task.coroutine
    # Given by the task rather than imported: the run loop is the runs package's, which is
    # built on this one.
    start_on_loop: Callable[[Coroutine[Any, Any, Any]], Future[Any]] = task.start_on_loop
    connection_errors = consumer.connection_errors
    # The pool's threads bound how many tasks execute at once; the loop takes their place.
    slots = asyncio.Semaphore(pool.limit)
    celery_handler: Handler | None = None

    def by_celery(*message_and_callbacks: Any) -> None:
        nonlocal celery_handler
        if celery_handler is None:
            celery_handler = default(task, app, consumer, **options)
        celery_handler(*message_and_callbacks)

    async def in_a_slot(work: Coroutine[Any, Any, Any]) -> Any:
        async with slots:
            return await work

    def handle(message: Message, body: Any, ack: Any, reject: Any, callbacks: Any) -> None:
        headers = message.headers
        if headers.get("eta") or headers.get("expires"):
            # Never sent by the runtime (a task applied with a countdown or an expiry):
            # Celery's own strategy keeps it until it is due, then its pool thread executes it.
            by_celery(message, body, ack, reject, callbacks)
            return
        task_id = headers.get("id")
        if task_id in worker_state.revoked:
            received_logger.info("Discarding revoked task: %s[%s]", name, task_id)
            ack(received_logger, connection_errors)
            return
        try:
            args, kwargs, _ = message.decode() if body is None else body
            redelivered = (message.delivery_info or {}).get("redelivered", False)
            work = coroutine_for(*args, first_delivery=redelivered is False, **kwargs)
        except Exception as error:  # a message no run task can execute: never retried
            trace_logger.error(
                "Task %s[%s] rejected: its message cannot be executed: %r",
                name,
                task_id,
                error,
                exc_info=True,
            )
            reject(trace_logger, connection_errors, requeue=False)
            return
        received_logger.info(trace.LOG_RECEIVED, {"name": name, "id": task_id})
        began = time.monotonic()

        def ended(future: Any) -> None:
            runtime = time.monotonic() - began
            error = None if future.cancelled() else future.exception()
            if future.cancelled():
                trace_logger.error("Task %s[%s] cancelled in %.3fs", name, task_id, runtime)
            elif error is None:
                trace_logger.info(
                    trace.LOG_SUCCESS,
                    {
                        "name": name,
                        "id": task_id,
                        "runtime": runtime,
                        "return_value": repr(future.result()),
                    },
                )
            else:
                trace_logger.error(
                    trace.LOG_FAILURE,
                    {
                        "name": name,
                        "id": task_id,
                        "description": "raised unexpected",
                        "exc": repr(error),
                    },
                    exc_info=error,
                )
            # Scheduled on the consumer's loop, which acknowledges the message there (as it
            # does the pool's acknowledgements).
            ack(trace_logger, connection_errors)

        start_on_loop(in_a_slot(work)).add_done_callback(ended)

    return handle
