"""The worker side of the Celery executor: one event loop per process, shared by its tasks."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from celery import Celery
from celery.app.task import Context
from celery.concurrency.prefork import TaskPool as PreforkTaskPool
from celery.concurrency.thread import TaskPool as ThreadTaskPool
from celery.signals import worker_ready
from celery.worker.request import Request
from kombu.asynchronous.timer import Timer

from copilot_runtime import tasks
from copilot_runtime.collector import SERVER_THRESHOLDS
from copilot_runtime.runs.executor import EXECUTE_RUN_TASK
from tests.support.redis_broker import next_delivered

HANDOVER_TIMEOUT = 10.0


class Consumer:
    """What the worker_ready signal's sender (Celery's consumer) offers: its pool and timer."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.timer = Timer()


@pytest.mark.usefixtures("collector_restored")
def test_a_threads_pool_worker_keeps_its_consumer_polling_and_settles_its_collector() -> None:
    consumer = Consumer(ThreadTaskPool(limit=1))
    gc.set_threshold(700, 10, 10)
    try:
        worker_ready.send(sender=consumer)

        [entry] = consumer.timer.queue
        assert entry.entry.fun.__wrapped__ is tasks._wake_consumer  # wrapped to repeat
        assert gc.get_threshold() == SERVER_THRESHOLDS
    finally:
        consumer.timer.stop()
        consumer.pool.executor.shutdown()


@pytest.mark.usefixtures("collector_restored")
def test_a_prefork_worker_leaves_both_to_its_pool_processes() -> None:
    consumer = Consumer(PreforkTaskPool(limit=1))
    gc.set_threshold(700, 10, 10)
    try:
        worker_ready.send(sender=consumer)

        assert consumer.timer.queue == []
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        consumer.timer.stop()


def _delivered(app: Celery, *, acknowledge: bool) -> Context:
    """The next run task on ``app``'s queue, as the executing task sees its request."""
    message = next_delivered(app, acknowledge=acknowledge)
    return Context(Request(message, app=app, task=tasks.execute_run).request_dict)


def test_a_task_kombu_puts_back_on_the_queue_is_not_a_first_delivery(redis_app: Celery) -> None:
    redis_app.send_task(EXECUTE_RUN_TASK, args=["run-1"])

    first = _delivered(redis_app, acknowledge=False)
    again = _delivered(redis_app, acknowledge=True)

    assert (tasks.first_delivery(first), tasks.first_delivery(again)) == (True, False)


def test_a_task_applied_in_process_is_not_taken_for_a_first_delivery() -> None:
    seen: list[bool] = []
    app = Celery("apply-test", set_as_current=False)

    @app.task(bind=True)
    def delivery(self: Any) -> None:
        seen.append(tasks.first_delivery(self.request))

    delivery.apply().get()
    assert seen == [False]


def test_a_task_of_several_runs_hands_them_over_together(monkeypatch: pytest.MonkeyPatch) -> None:
    handed: list[tuple[list[tuple[str, Any]], bool]] = []

    async def execute(*, runs: list[tuple[str, Any]], first_delivery: bool) -> list[str]:
        handed.append((runs, first_delivery))
        return [f"done {run_id}" for run_id, _ in runs]

    monkeypatch.setattr(tasks, "runs_execute_stored", execute)
    placement = {"thread_id": "t1"}

    result = tasks.execute_runs.apply(args=[[["run-1", placement], ["run-2", None]]]).get()

    assert result == ["done run-1", "done run-2"]
    # Applied in process: no broker flag, so not taken for a first delivery.
    assert handed == [([("run-1", placement), ("run-2", None)], False)]
