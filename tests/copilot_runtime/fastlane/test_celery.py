"""A threads-pool worker's consumer starts a run task's work on the run loop itself, and
acknowledges its message when the work ends; any other pool keeps Celery's own strategy.

The messages are real: sent to the test Redis by Celery and read back through kombu, as a
worker's consumer receives them. The acknowledgement and rejection callbacks stand in for the
consumer's (which schedule kombu's on its own loop).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from celery import Celery
from celery.concurrency.prefork import TaskPool as PreforkTaskPool
from celery.concurrency.thread import TaskPool as ThreadTaskPool
from celery.worker import state as worker_state
from kombu.message import Message
from kombu.utils.imports import symbol_by_name

from copilot_runtime import tasks
from copilot_runtime.fastlane import celery as task_strategy
from copilot_runtime.runs import worker_loop as run_loop
from copilot_runtime.runs.worker_loop import start_on_process_loop
from tests.support.generate_e2e import wait_for
from tests.support.redis_broker import RECEIVE_TIMEOUT_SECONDS, next_delivered

TASK_NAME = "copilot.test_run_task"
SETTLE_SECONDS = 0.2


@dataclass
class Outcome:
    """What the handler did with one message, as the consumer's callbacks saw it."""

    acked: list[str] = field(default_factory=list)  # the thread each acknowledgement came from
    rejected: list[bool] = field(default_factory=list)  # requeue, for each rejection

    def ack(self, logger: logging.Logger, errors: tuple[type[BaseException], ...]) -> None:
        self.acked.append(threading.current_thread().name)

    def reject(
        self, logger: logging.Logger, errors: tuple[type[BaseException], ...], requeue: bool
    ) -> None:
        self.rejected.append(requeue)


class Work:
    """A run task's work that records each start and waits until the test opens its gate."""

    def __init__(self, *, fails: bool = False) -> None:
        self.fails = fails
        self.started: list[tuple[tuple[Any, ...], bool, str]] = []
        self.running = 0
        self.most_at_once = 0
        # Waited on the run loop only (an event binds to its loop on first wait).
        self.gate = asyncio.Event()
        made.append(self)

    def coroutine(self, *args: Any, first_delivery: bool) -> Coroutine[Any, Any, str]:
        return self._run(args, first_delivery)

    async def _run(self, args: tuple[Any, ...], first_delivery: bool) -> str:
        self.started.append((args, first_delivery, threading.current_thread().name))
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await self.gate.wait()
        finally:
            self.running -= 1
        if self.fails:
            raise RuntimeError("the run broke")
        return "succeeded"

    def open_gate(self) -> None:
        run_loop.process_loop().call_soon_threadsafe(self.gate.set)


made: list[Work] = []


@pytest.fixture(autouse=True)
def gates_opened_at_the_end() -> Iterator[None]:
    """Work left waiting by a failed test would hold the process's exit (which waits for
    started runs) for the whole run time limit."""
    yield
    while made:
        made.pop().open_gate()


def handler_for(work: Work, pool: Any) -> Callable[..., Any]:
    task = SimpleNamespace(
        name=TASK_NAME, coroutine=work.coroutine, start_on_loop=start_on_process_loop
    )
    consumer = SimpleNamespace(pool=pool, connection_errors=())
    return task_strategy.on_the_run_loop(task, None, consumer)


@pytest.fixture
def threads_pool() -> Iterator[ThreadTaskPool]:
    pool = ThreadTaskPool(limit=2)
    try:
        yield pool
    finally:
        pool.executor.shutdown()


def received(app: Celery, *args: Any, put_back_first: bool = False) -> Message:
    """A run task message with ``args``, as the consumer receives it. ``put_back_first``: it
    was delivered once and not acknowledged (kombu put it back), so this is a redelivery."""
    app.send_task(TASK_NAME, args=list(args))
    if put_back_first:
        next_delivered(app, acknowledge=False)
    return next_delivered(app, acknowledge=True)


def handle(handler: Callable[..., Any], message: Message) -> Outcome:
    outcome = Outcome()
    handler(message, None, outcome.ack, outcome.reject, set())
    return outcome


def test_the_work_starts_on_the_run_loop_and_its_message_is_acknowledged_when_it_ends(
    redis_app: Celery, threads_pool: ThreadTaskPool
) -> None:
    work = Work()
    handler = handler_for(work, threads_pool)

    outcome = handle(handler, received(redis_app, "run-1", {"thread_id": "t1"}))

    # The handler returned at once: the work is in progress on the loop, not acknowledged.
    wait_for(lambda: work.started, timeout=RECEIVE_TIMEOUT_SECONDS, what="the work to start")
    assert work.started == [(("run-1", {"thread_id": "t1"}), True, run_loop.LOOP_THREAD_NAME)]
    assert outcome.acked == []
    work.open_gate()
    wait_for(lambda: outcome.acked, timeout=RECEIVE_TIMEOUT_SECONDS, what="the acknowledgement")
    assert outcome.acked == [run_loop.LOOP_THREAD_NAME]
    assert outcome.rejected == []


def test_a_redelivered_message_is_not_taken_for_a_first_delivery(
    redis_app: Celery, threads_pool: ThreadTaskPool
) -> None:
    work = Work()
    handler = handler_for(work, threads_pool)

    outcome = handle(handler, received(redis_app, "run-2", put_back_first=True))

    wait_for(lambda: work.started, timeout=RECEIVE_TIMEOUT_SECONDS, what="the work to start")
    assert [(args, first) for args, first, _ in work.started] == [(("run-2",), False)]
    work.open_gate()
    wait_for(lambda: outcome.acked, timeout=RECEIVE_TIMEOUT_SECONDS, what="the acknowledgement")


def test_failed_work_is_logged_and_its_message_still_acknowledged(
    redis_app: Celery, threads_pool: ThreadTaskPool, caplog: pytest.LogCaptureFixture
) -> None:
    work = Work(fails=True)
    handler = handler_for(work, threads_pool)

    with caplog.at_level(logging.INFO):
        outcome = handle(handler, received(redis_app, "run-3"))
        work.open_gate()
        wait_for(lambda: outcome.acked, timeout=RECEIVE_TIMEOUT_SECONDS, what="the acknowledgement")

    # As Celery acknowledges a failed acks_late task, and logs it as its own tracer does.
    assert outcome.rejected == []
    [failure] = [record for record in caplog.records if record.levelno == logging.ERROR]
    assert failure.name == "celery.app.trace"
    assert f"Task {TASK_NAME}[" in failure.getMessage()
    assert "raised unexpected: RuntimeError('the run broke')" in failure.getMessage()
    assert failure.exc_info is not None
    received_lines = [r.getMessage() for r in caplog.records if r.name.endswith("strategy")]
    assert len(received_lines) == 1 and received_lines[0].endswith("] received")


def test_work_that_succeeds_is_logged_as_celery_logs_a_task_that_succeeded(
    redis_app: Celery, threads_pool: ThreadTaskPool, caplog: pytest.LogCaptureFixture
) -> None:
    work = Work()
    handler = handler_for(work, threads_pool)
    message = received(redis_app, "run-4")

    with caplog.at_level(logging.INFO):
        outcome = handle(handler, message)
        work.open_gate()
        wait_for(lambda: outcome.acked, timeout=RECEIVE_TIMEOUT_SECONDS, what="the acknowledgement")

    task_id = message.headers["id"]
    [line] = [r.getMessage() for r in caplog.records if r.name == "celery.app.trace"]
    assert line.startswith(f"Task {TASK_NAME}[{task_id}] succeeded in ")
    assert line.endswith("s: 'succeeded'")


def test_a_message_the_work_cannot_take_is_rejected_without_requeue(
    redis_app: Celery, threads_pool: ThreadTaskPool
) -> None:
    work = Work()
    handler = handler_for(work, threads_pool)

    # The work takes positional arguments and first_delivery only.
    redis_app.send_task(TASK_NAME, args=["run-5"], kwargs={"unknown": 1})
    outcome = handle(handler, next_delivered(redis_app, acknowledge=True))

    assert outcome.rejected == [False]
    assert outcome.acked == []
    assert work.started == []


def test_a_revoked_task_is_acknowledged_and_not_run(
    redis_app: Celery, threads_pool: ThreadTaskPool
) -> None:
    work = Work()
    handler = handler_for(work, threads_pool)
    message = received(redis_app, "run-6")
    worker_state.revoked.add(message.headers["id"])
    try:
        outcome = handle(handler, message)
    finally:
        worker_state.revoked.discard(message.headers["id"])

    assert outcome.acked == [threading.current_thread().name]
    threading.Event().wait(SETTLE_SECONDS)
    assert work.started == []


def test_no_more_tasks_execute_at_once_than_the_pool_has_threads(
    redis_app: Celery, threads_pool: ThreadTaskPool
) -> None:
    work = Work()
    handler = handler_for(work, threads_pool)  # two threads

    outcomes = [handle(handler, received(redis_app, f"run-{n}")) for n in range(3)]

    wait_for(lambda: len(work.started) == 2, timeout=RECEIVE_TIMEOUT_SECONDS, what="two to start")
    threading.Event().wait(SETTLE_SECONDS)
    assert len(work.started) == 2
    work.open_gate()  # the two end; the third starts, past the gate already open
    wait_for(
        lambda: all(outcome.acked for outcome in outcomes),
        timeout=RECEIVE_TIMEOUT_SECONDS,
        what="all three to end",
    )
    assert [args for args, _, _ in work.started] == [("run-0",), ("run-1",), ("run-2",)]
    assert work.most_at_once == 2


@pytest.mark.parametrize("timing", [{"countdown": 30}, {"expires": 60}])
def test_a_task_with_a_countdown_or_an_expiry_is_left_to_celerys_strategy(
    redis_app: Celery,
    threads_pool: ThreadTaskPool,
    monkeypatch: pytest.MonkeyPatch,
    timing: dict[str, int],
) -> None:
    handed: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        task_strategy, "default", lambda *args, **options: lambda *message: handed.append(message)
    )
    work = Work()
    handler = handler_for(work, threads_pool)
    redis_app.send_task(TASK_NAME, args=["run-9"], **timing)
    message = next_delivered(redis_app, acknowledge=True)

    outcome = handle(handler, message)

    # Celery's handler has it (with the consumer's callbacks), and keeps it until it is due.
    [(handed_message, body, ack, reject, _)] = handed
    assert (handed_message, body, ack, reject) == (message, None, outcome.ack, outcome.reject)
    threading.Event().wait(SETTLE_SECONDS)
    assert work.started == []
    assert outcome.acked == []


def test_another_pool_keeps_celerys_default_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, ...]] = []

    def default(task: Any, app: Any, consumer: Any, **options: Any) -> str:
        calls.append((task, app, consumer, options))
        return "celery's handler"

    monkeypatch.setattr(task_strategy, "default", default)
    task = SimpleNamespace(
        name=TASK_NAME, coroutine=Work().coroutine, start_on_loop=start_on_process_loop
    )
    consumer = SimpleNamespace(pool=PreforkTaskPool(limit=1), connection_errors=())

    handler = task_strategy.on_the_run_loop(task, "app", consumer, hostname="w1")

    assert handler == "celery's handler"
    assert calls == [(task, "app", consumer, {"hostname": "w1"})]


def test_the_run_tasks_use_this_strategy_and_make_the_engines_work() -> None:
    for task in (tasks.execute_run, tasks.execute_runs):
        assert task.Strategy == tasks.RUN_TASK_STRATEGY
    # As Celery resolves it when the consumer builds its strategies.
    assert symbol_by_name(tasks.RUN_TASK_STRATEGY) is task_strategy.on_the_run_loop
    one = tasks.execute_run.coroutine("run-7", {"thread_id": "t"}, first_delivery=True)
    several = tasks.execute_runs.coroutine([["run-8", None]], first_delivery=False)
    try:
        assert one.cr_code.co_name == "run_execute_stored"
        assert several.cr_code.co_name == "runs_execute_stored"
        assert one.cr_frame.f_locals == {
            "run_id": "run-7",
            "placement": {"thread_id": "t"},
            "first_delivery": True,
        }
        assert several.cr_frame.f_locals == {
            "runs": [("run-8", None)],
            "first_delivery": False,
        }
    finally:
        one.close()
        several.close()


def test_with_the_lane_closed_the_threads_pool_keeps_celerys_default_strategy(
    monkeypatch: pytest.MonkeyPatch,
    untested_version: Callable[[str], None],
    threads_pool: ThreadTaskPool,
) -> None:
    untested_version("celery")
    calls: list[Any] = []

    def default(task: Any, app: Any, consumer: Any, **options: Any) -> str:
        calls.append(task)
        return "celery's handler"

    monkeypatch.setattr(task_strategy, "default", default)
    task = SimpleNamespace(
        name=TASK_NAME, coroutine=Work().coroutine, start_on_loop=start_on_process_loop
    )
    consumer = SimpleNamespace(pool=threads_pool, connection_errors=())

    assert task_strategy.on_the_run_loop(task, "app", consumer) == "celery's handler"
    assert calls == [task]
