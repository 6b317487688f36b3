"""Infrastructure outages with the Celery executor: Redis restarting, Postgres unreachable.

A Redis restart while no run is active must not need a web or worker restart; a database
that cannot be reached must give callers a clear, quick error in the protocol's shape.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import redis

from conversations.models import RunStatus
from tests.e2e.celery.conftest import STOCK_TRANSPORT_ENV
from tests.e2e.celery.support import fake, in_background, log_entries, run_of_thread
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    assert_no_traceback,
    finished_run,
    generate_command,
    generate_data,
    graphql_error_codes,
    joined_content,
    text_input,
    thread_rows,
    wait_for,
)
from tests.support.workers import free_port

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.e2e.celery.conftest import RedisServer

pytestmark = pytest.mark.e2e

CLIENT = JS_CLIENT_VERSIONS[0]
# The database connect timeout the served process gets (settings: DATABASE_CONNECT_TIMEOUT).
CONNECT_TIMEOUT_SECONDS = 2


def one_turn(server_url: str, thread_id: str, text: str, *, timeout: float = 30) -> dict[str, Any]:
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", fake({"text": text}))])
    return run_js(CLIENT, generate_command(server_url, data), timeout=timeout)


def test_a_redis_restart_between_runs_needs_no_restart_of_web_or_worker(
    celery_stack: Any, dedicated_redis: RedisServer, fake_upstream: FakeUpstream
) -> None:
    server, worker = celery_stack(dedicated_redis.url)
    before = one_turn(server.url, "redis-restart-before", "Before the restart.")
    assert before["final"]["status"]["code"] == "Success"
    connects = worker.log_text().count("Connected to ")

    dedicated_redis.restart()
    # Right away, while the worker is still reconnecting (Celery retries every 2 s): the run
    # waits in the queue. Every connection the web process held before is stale now.
    replies = [
        one_turn(server.url, f"redis-restart-after-{index}", f"Answer {index} after the restart.")
        for index in range(2)
    ]

    for index, after in enumerate(replies):
        assert after["errors"] == []
        assert after["final"].get("status", {}).get("code") == "Success", after["final"]
        (reply,) = after["final"]["messages"]
        assert joined_content(reply) == f"Answer {index} after the restart."
        assert finished_run(after["final"]["runId"]).status == RunStatus.SUCCEEDED
    # The worker reconnected on its own; nothing was restarted.
    assert worker.log_text().count("Connected to ") > connects
    assert worker.process.poll() is None and server.process.poll() is None
    assert httpx.get(f"{server.url}/readyz", timeout=5).status_code == 200


def test_a_two_second_redis_outage_during_a_run_leaves_the_worker_serving(
    celery_stack: Any, dedicated_redis: RedisServer, fake_upstream: FakeUpstream
) -> None:
    server, worker = celery_stack(dedicated_redis.url)
    thread_id = "redis-outage-in-flight"
    directive = {"tokens": 80, "delay_ms": 50}  # four seconds of streaming
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", fake(directive))])

    with in_background(
        lambda: run_js(CLIENT, generate_command(server.url, data), timeout=60)
    ) as client:

        def streaming() -> Any:
            run = run_of_thread(thread_id)
            deltas = sum(kind == "text_delta" for _, kind, _ in log_entries(run.pk)) if run else 0
            return run if deltas >= 2 else None

        run = wait_for(streaming, timeout=20, what="the worker to stream text")
        dedicated_redis.stop()
        time.sleep(2)
        dedicated_redis.start()
        reply = client.result(timeout=60)

    # The run in flight ends whole, and what the client saw is what was stored.
    assert finished_run(run.pk, timeout=30).status == RunStatus.SUCCEEDED
    stored = thread_rows(thread_id)[-1].content
    assert len(stored.split()) == 80
    (message,) = reply["final"]["messages"]
    assert joined_content(message) == stored
    # The worker survived the outage and serves the next runs.
    after = one_turn(server.url, "redis-outage-after", "Still here.")
    assert after["final"]["status"]["code"] == "Success", after["final"]
    assert worker.process.poll() is None, worker.log_text()[-3000:]
    assert "Unrecoverable error" not in worker.log_text()


# The in-flight run task's "received" line, with its id.
_RUN_TASK_RECEIVED = re.compile(r"Task (copilot\.execute_runs?\[[0-9a-f-]+\]) received")


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_a_redis_restart_under_a_late_acked_run_on_kombus_own_transport_leaves_the_worker_serving(
    live_server_factory: Any,
    celery_worker_factory: Any,
    celery_env: Any,
    dedicated_redis: RedisServer,
    fake_upstream: FakeUpstream,
    pool: str,
) -> None:
    # kombu's own Redis transport, not the runtime's subclass; a Redis that keeps its data
    # through the restart, so that the run's message is still recorded as unacknowledged when
    # the worker connects again: acknowledged once, it must not come back.
    env = celery_env(dedicated_redis.url, **STOCK_TRANSPORT_ENV)
    worker = celery_worker_factory(env=env, pool=pool)
    assert re.search(r"transport: +redis://", worker.log_text()), worker.log_text()[:3000]
    server = live_server_factory(env=env)
    thread_id = f"redis-restart-stock-transport-{pool}"
    directive = {"tokens": 80, "delay_ms": 50}  # four seconds of streaming
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", fake(directive))])
    broker = redis.Redis.from_url(dedicated_redis.url)

    try:
        with in_background(
            lambda: run_js(CLIENT, generate_command(server.url, data), timeout=60)
        ) as client:

            def streaming() -> Any:
                run = run_of_thread(thread_id)
                entries = log_entries(run.pk) if run else []
                return run if sum(kind == "text_delta" for _, kind, _ in entries) >= 2 else None

            run = wait_for(streaming, timeout=20, what="the worker to stream text")
            (task,) = _RUN_TASK_RECEIVED.findall(worker.log_text())
            broker.shutdown(save=True)  # saved to disk, loaded again at start
            dedicated_redis.stop()
            wait_for(
                lambda: "Connection to broker lost" in worker.log_text(),
                timeout=10,
                what="the worker to notice the outage",
            )
            dedicated_redis.start()
            # The run goes on; its message is still the worker's, unacknowledged.
            assert broker.hlen("unacked") == 1
            reply = client.result(timeout=60)

        # The run in flight ends whole, and what the client saw is what was stored.
        assert finished_run(run.pk, timeout=30).status == RunStatus.SUCCEEDED
        stored = thread_rows(thread_id)[-1].content
        assert len(stored.split()) == 80
        (message,) = reply["final"]["messages"]
        assert joined_content(message) == stored
        # The worker survived the outage and serves the next runs.
        after = one_turn(server.url, f"redis-restart-stock-transport-after-{pool}", "Still here.")
        assert after["final"]["status"]["code"] == "Success", after["final"]
        assert worker.process.poll() is None, worker.log_text()[-3000:]
        assert "Unrecoverable error" not in worker.log_text()
        # The run's message was acknowledged on the new connection (nothing left for Redis to
        # deliver again after the visibility timeout) and delivered once.
        wait_for(
            lambda: broker.hlen("unacked") == 0,
            timeout=10,
            what="the run's message to be acknowledged",
        )
        assert broker.llen("celery") == 0
        assert worker.log_text().count(f"Task {task} received") == 1
    finally:
        broker.close()


@pytest.fixture
def silent_database_port() -> Iterator[int]:
    """A port that accepts TCP connections and never answers: a database that hangs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    try:
        yield int(listener.getsockname()[1])
    finally:
        listener.close()


def closed_port() -> int:
    # From this worker's own block: an ephemeral port freed by a probe can be taken at once by
    # a server another test (or another suite on the machine) starts.
    return free_port()


@pytest.mark.parametrize("database", ["refused", "silent"])
def test_an_unreachable_database_gives_a_clear_error_quickly(
    live_server_factory: Any,
    celery_env: Any,
    redis_url: str,
    silent_database_port: int,
    database: str,
) -> None:
    port = closed_port() if database == "refused" else silent_database_port
    server = live_server_factory(
        env=celery_env(
            redis_url,
            DATABASE_URL=f"postgres://copilot:copilot@127.0.0.1:{port}/copilot",
            DATABASE_CONNECT_TIMEOUT=str(CONNECT_TIMEOUT_SECONDS),
        )
    )
    bound = CONNECT_TIMEOUT_SECONDS + 3.0

    started = time.monotonic()
    ready = httpx.get(f"{server.url}/readyz", timeout=bound + 5)
    assert time.monotonic() - started < bound
    assert ready.status_code == 503
    assert "database unavailable" in ready.json()["problems"]

    # {hello} does not touch the database: the process itself is fine.
    hello = httpx.post(f"{server.url}/api/copilotkit", json={"query": "{hello}"}, timeout=5)
    assert hello.status_code == 200

    data = generate_data(thread_id="db-down", messages=[text_input("u1", "Hello?")])
    started = time.monotonic()
    result = run_js(CLIENT, generate_command(server.url, data), timeout=bound + 20)
    elapsed = time.monotonic() - started

    assert elapsed < bound + 1.0, f"the client waited {elapsed:.1f}s"
    assert [exchange["status"] for exchange in result["http"]] == [200]
    assert "NETWORK_ERROR" in graphql_error_codes(result)
    assert_no_traceback(str(result["errors"]))
