"""Handing a run to the Celery workers: the message they receive."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from celery import Celery
from celery._state import get_current_app

from copilot_runtime.engine.executor import EXECUTE_RUN_TASK, enqueue_on_worker

RECEIVE_TIMEOUT = 5.0


@pytest.fixture
def memory_broker_app() -> Iterator[Celery]:
    """A Celery app on kombu's in-memory broker, current while the test runs."""
    previous = get_current_app()
    app = Celery("executor-test", broker="memory://", set_as_current=True)
    try:
        yield app
    finally:
        previous.set_current()
        app.close()


def test_the_task_carries_the_placement_and_names_only_the_run(memory_broker_app: Celery) -> None:
    history = [{"id": f"m{n}", "content": "a private message " * 20} for n in range(50)]
    placement = {"thread_id": "t1", "thread_pk": 7, "next_position": 3, "request": history}

    enqueue_on_worker(run_id="run-1", placement=placement)

    with memory_broker_app.connection_for_read() as connection:
        message = connection.SimpleQueue("celery").get(timeout=RECEIVE_TIMEOUT)
    args, _kwargs, _embed = message.decode()
    assert message.headers["task"] == EXECUTE_RUN_TASK
    assert args == ["run-1", placement]
    # What logs and monitors show of it: the run, not the conversation.
    assert message.headers["argsrepr"] == "['run-1']"
