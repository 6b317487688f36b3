"""Queueing a run from the event loop on a Redis broker: the message Celery's own publish pushes,
pushed in one round trip; anything Celery's publish would do more is left to it. Runs queued
while a push is in flight go together, in one message."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redis
from celery import Celery, signals
from kombu import Exchange, Queue

from copilot_runtime.fastlane import kombu as broker
from copilot_runtime.runs import executor
from copilot_runtime.runs.executor import EXECUTE_RUN_TASK, EXECUTE_RUNS_TASK, enqueue_run
from copilot_runtime.runs.publish import (
    fast_publish_possible,
    publish_task,
    same_route,
    task_message,
    task_publish_close,
)
from tests.support.redis_broker import redis_test_url

RECEIVE_TIMEOUT = 5.0
PLACEMENT = {"thread_id": "t1", "thread_pk": 7, "next_position": 3, "request": {"m": "hi"}}


def _pushed(app: Celery) -> dict[str, Any]:
    client = redis.Redis.from_url(redis_test_url())
    try:
        raw = client.rpop(app.conf.task_default_queue)
    finally:
        client.close()
    assert raw is not None, "nothing was pushed"
    return dict(json.loads(raw))


def test_the_message_is_the_one_celerys_own_publish_pushes(redis_app: Celery) -> None:
    arguments = {"args": ["run-1", PLACEMENT], "argsrepr": "['run-1']", "time_limit": 660.0}
    redis_app.send_task(EXECUTE_RUN_TASK, task_id="task-1", **arguments)
    by_celery = _pushed(redis_app)

    key, ours = task_message(redis_app, name=EXECUTE_RUN_TASK, task_id="task-1", **arguments)
    mine = json.loads(ours)

    assert key == redis_app.conf.task_default_queue
    # Each push has a delivery tag of its own (a fresh UUID); the body is the same JSON value
    # (written without kombu's spaces), as text where kombu writes base64; all else is the same.
    assert by_celery["properties"].pop("delivery_tag") != mine["properties"].pop("delivery_tag")
    assert by_celery["properties"].pop("body_encoding") == "base64"
    assert mine["properties"].pop("body_encoding") is None
    assert json.loads(mine.pop("body")) == json.loads(base64.b64decode(by_celery.pop("body")))
    assert mine == by_celery


@pytest.mark.parametrize(
    "transport",
    [
        pytest.param(None, id="kombu's transport"),
        pytest.param("copilot_runtime.broker:Transport", id="the project's transport"),
    ],
)
async def test_a_pushed_run_is_read_as_celery_reads_its_tasks(
    redis_app: Celery, transport: str | None
) -> None:
    if transport is not None:
        redis_app.conf.broker_transport = transport
    assert fast_publish_possible(redis_app, name=EXECUTE_RUN_TASK)
    try:
        await publish_task(
            redis_app,
            name=EXECUTE_RUN_TASK,
            args=["run-2", PLACEMENT],
            argsrepr="['run-2']",
            time_limit=60.0,
        )
    finally:
        await task_publish_close()

    with redis_app.connection_for_read() as connection:
        assert (type(connection.transport) is broker.Transport) == (transport is not None)
        queue = connection.SimpleQueue(redis_app.conf.task_default_queue)
        message = queue.get(timeout=RECEIVE_TIMEOUT)
        message.ack()
        queue.close()
    args, kwargs, _embed = message.decode()
    assert (args, kwargs) == (["run-2", PLACEMENT], {})
    assert message.headers["task"] == EXECUTE_RUN_TASK
    assert message.headers["argsrepr"] == "['run-2']"
    assert message.headers["timelimit"] == [60.0, None]


def _on_publish(**_: Any) -> None:
    """A receiver of Celery's publish signal, as tracing integrations connect one."""


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda app: setattr(app.conf, "broker_url", "memory://"), id="not redis"),
        pytest.param(
            lambda app: setattr(app.conf, "broker_transport_options", {"global_keyprefix": "p:"}),
            id="key prefix",
        ),
        pytest.param(lambda app: setattr(app.conf, "task_compression", "gzip"), id="compression"),
        pytest.param(lambda app: setattr(app.conf, "task_serializer", "pickle"), id="serializer"),
        pytest.param(lambda app: setattr(app.conf, "task_send_sent_event", True), id="events"),
        pytest.param(
            lambda app: setattr(
                app.conf,
                "task_routes",
                {
                    EXECUTE_RUN_TASK: {
                        "queue": Queue("runs", Exchange("runs", type="topic"), routing_key="r.#")
                    }
                },
            ),
            id="topic route",
        ),
        pytest.param(
            lambda app: setattr(app.conf, "task_routes", {EXECUTE_RUN_TASK: {"priority": 5}}),
            id="priority",
        ),
    ],
)
def test_anything_more_than_a_plain_push_is_left_to_celery(redis_app: Celery, change: Any) -> None:
    assert fast_publish_possible(redis_app, name=EXECUTE_RUN_TASK)
    changed = Celery("publish-test-changed", broker=redis_test_url(), set_as_current=False)
    try:
        change(changed)  # before its first use: its router is built once
        assert not fast_publish_possible(changed, name=EXECUTE_RUN_TASK)
    finally:
        changed.close()


def test_a_receiver_of_the_publish_signals_is_left_celerys_publish(redis_app: Celery) -> None:
    for signal in (signals.before_task_publish, signals.after_task_publish):
        signal.connect(_on_publish)
        try:
            assert not fast_publish_possible(redis_app, name=EXECUTE_RUN_TASK)
        finally:
            signal.disconnect(_on_publish)
    assert fast_publish_possible(redis_app, name=EXECUTE_RUN_TASK)


@pytest.mark.parametrize("library", ["celery", "kombu"])
def test_an_untested_celery_or_kombu_is_left_celerys_publish(
    library: str, untested_version: Callable[[str], None]
) -> None:
    # The pushed message copies what the tested releases write (copilot_runtime/fastlane).
    untested_version(library)
    app = Celery("publish-test-untested", broker=redis_test_url(), set_as_current=False)
    try:
        assert not fast_publish_possible(app, name=EXECUTE_RUN_TASK)
    finally:
        app.close()


async def test_a_failed_push_is_published_by_celery_instead(
    current_redis_app: Celery, monkeypatch: pytest.MonkeyPatch
) -> None:
    from copilot_runtime.runs import publish as task_publish

    async def unreachable(*_: Any, **__: Any) -> None:
        raise redis.exceptions.ConnectionError("Redis went away")

    monkeypatch.setattr(task_publish, "publish_task", unreachable)
    by_celery: list[dict[str, Any]] = []
    monkeypatch.setattr(executor, "enqueue_on_worker", lambda **kwargs: by_celery.append(kwargs))

    await enqueue_run(run_id="run-3", placement=PLACEMENT)

    assert by_celery == [{"run_id": "run-3", "placement": PLACEMENT}]


async def test_a_run_is_queued_on_the_loop_when_the_broker_allows(
    current_redis_app: Celery, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(**_: Any) -> None:
        raise AssertionError("Celery's publish was used")

    monkeypatch.setattr(executor, "enqueue_on_worker", never)
    try:
        await enqueue_run(run_id="run-4", placement=PLACEMENT)
    finally:
        await task_publish_close()

    pushed = _pushed(current_redis_app)
    assert pushed["headers"]["task"] == EXECUTE_RUN_TASK
    assert pushed["headers"]["argsrepr"] == "['run-4']"


async def test_the_push_has_the_brokers_connect_timeout(redis_app: Celery) -> None:
    """An unreachable Redis fails the push within the broker's own connect timeout (then
    Celery's publish takes over), rather than holding the turn."""
    from copilot_runtime.runs.publish import CLIENTS

    redis_app.conf.broker_connection_timeout = 1.5
    try:
        client = CLIENTS.get(redis_app)
        assert client.connection_pool.connection_kwargs["socket_connect_timeout"] == 1.5
    finally:
        await task_publish_close()


def _received(app: Celery, queue_name: str | None = None) -> list[tuple[str, str, list[Any]]]:
    """(task, argsrepr, args) of every message on the queue, in the order pushed, as a worker
    reads them."""
    received = []
    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue(queue_name or app.conf.task_default_queue)
        try:
            while True:
                try:
                    message = queue.get(timeout=0.5)
                except queue.Empty:
                    break
                message.ack()
                args, _kwargs, _embed = message.decode()
                received.append((message.headers["task"], message.headers["argsrepr"], args))
        finally:
            queue.close()
    return received


async def test_runs_queued_while_a_push_is_in_flight_go_in_one_message(
    current_redis_app: Celery,
) -> None:
    placements = {name: {**PLACEMENT, "thread_id": name} for name in ("a", "b", "c", "d")}
    try:
        # Four turns queue their runs at one moment: the first is pushed at once, the other
        # three while its push is in flight.
        await asyncio.gather(
            *(enqueue_run(run_id=f"run-{name}", placement=p) for name, p in placements.items())
        )
    finally:
        await task_publish_close()

    assert _received(current_redis_app) == [
        (EXECUTE_RUN_TASK, "['run-a']", ["run-a", placements["a"]]),
        (
            EXECUTE_RUNS_TASK,
            "[['run-b', 'run-c', 'run-d']]",
            [[["run-b", placements["b"]], ["run-c", placements["c"]], ["run-d", placements["d"]]]],
        ),
    ]


async def test_runs_queued_one_at_a_time_go_one_per_message(current_redis_app: Celery) -> None:
    try:
        for name in ("a", "b"):
            await enqueue_run(run_id=f"run-{name}", placement=PLACEMENT)
    finally:
        await task_publish_close()

    assert [task for task, _, _ in _received(current_redis_app)] == [EXECUTE_RUN_TASK] * 2


async def test_with_a_route_of_the_one_run_task_alone_each_run_keeps_its_message(
    current_redis_app: Celery,
) -> None:
    """Grouped runs would leave the queue the one-run task is routed to: they go one by one."""
    queue_name = f"runs-{uuid.uuid4()}"
    current_redis_app.conf.task_routes = {EXECUTE_RUN_TASK: {"queue": queue_name}}
    assert fast_publish_possible(current_redis_app, name=EXECUTE_RUN_TASK)
    assert not same_route(current_redis_app, EXECUTE_RUNS_TASK, EXECUTE_RUN_TASK)
    try:
        await asyncio.gather(
            *(enqueue_run(run_id=f"run-{name}", placement=PLACEMENT) for name in ("a", "b", "c"))
        )
    finally:
        await task_publish_close()
        client = redis.Redis.from_url(redis_test_url())
        try:
            received = _received(current_redis_app, queue_name)
        finally:
            client.delete(queue_name)
            client.close()

    assert [(task, repr_) for task, repr_, _ in received] == [
        (EXECUTE_RUN_TASK, f"['run-{name}']") for name in ("a", "b", "c")
    ]


def test_both_run_tasks_are_routed_alike_by_a_route_for_both(redis_app: Celery) -> None:
    redis_app.conf.task_routes = {"copilot.*": {"queue": "runs"}}
    assert same_route(redis_app, EXECUTE_RUNS_TASK, EXECUTE_RUN_TASK)


async def test_a_failed_grouped_push_leaves_each_run_to_celerys_publish(
    current_redis_app: Celery, monkeypatch: pytest.MonkeyPatch
) -> None:
    from copilot_runtime.runs import publish as task_publish

    async def unreachable(*_: Any, **__: Any) -> None:
        await asyncio.sleep(0)  # in flight for a turn of the loop: the others group
        raise redis.exceptions.ConnectionError("Redis went away")

    monkeypatch.setattr(task_publish, "publish_task", unreachable)
    by_celery: list[dict[str, Any]] = []
    monkeypatch.setattr(executor, "enqueue_on_worker", lambda **kwargs: by_celery.append(kwargs))

    await asyncio.gather(
        *(enqueue_run(run_id=f"run-{name}", placement=PLACEMENT) for name in ("a", "b", "c"))
    )

    assert sorted(queued["run_id"] for queued in by_celery) == ["run-a", "run-b", "run-c"]
