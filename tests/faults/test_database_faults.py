"""The database failing under the runtime, for real: every session terminated (a failover, a
PgBouncer restart, an idle-connection reaper), then the server restarted, each while runs
stream, on the inline executor and on Celery workers.

Each fault ends the same way: the service serves again by itself within five seconds of the
database's return (the first request may get the protocol's clear error, none after it does),
every run ends with a clear code, and nothing stored before is lost or stored twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.faults.conftest import RUN_STALE_SECONDS, FaultDatabase, _manage
from tests.faults.traffic import (
    RECOVERY_SECONDS,
    RunAnswer,
    assert_clear,
    assert_runs_ended_with_codes,
    fake,
    in_background,
    logged_deltas,
    recovery_after,
    stored_messages,
    v2_run,
    wait_for,
)
from tests.support.redis_server import RedisServer

pytestmark = [pytest.mark.faults, pytest.mark.serial]

# Two live runs of about two and a half seconds each.
LIVE_RUNS = 2
LIVE = {"tokens": 50, "delay_ms": 50}
# How long the database stays down in the restart.
OUTAGE_SECONDS = 2.0


def _live_runs(url: str, token: str, prefix: str) -> Callable[[int], RunAnswer]:
    return lambda index: v2_run(url, token, f"{prefix}-{index}", fake(LIVE), timeout=60)


def _streaming(database: FaultDatabase, prefix: str) -> bool:
    return all(logged_deltas(database, f"{prefix}-{i}") >= 2 for i in range(LIVE_RUNS))


def _ended_clearly(answer: RunAnswer) -> None:
    """A run the fault hit ends in the protocol's shape: finished, or a RUN_ERROR with a code."""
    if not answer.succeeded:
        assert_clear(answer)


def _reap(database: FaultDatabase) -> None:
    """What the beat's periodic task does for runs whose executor lost them in the outage."""
    wait_for(
        lambda: (
            not database.rows(
                "SELECT 1 FROM conversations_run WHERE status IN ('pending', 'running') "
                "AND (heartbeat_at IS NULL OR heartbeat_at > now() - interval '3 seconds')"
            )
        ),
        timeout=20,
        what="the live runs to end or go stale",
    )
    _manage(database.url, "reap_runs", COPILOT_RUNTIME_RUN_STALE_SECONDS=RUN_STALE_SECONDS)


def _fault_then_recover(
    *,
    database: FaultDatabase,
    url: str,
    prefix: str,
    fault: Callable[[], float],
) -> float:
    """Runs stream, ``fault`` happens (returning when the database came back), then requests
    go until one succeeds. Returns the seconds from the return to the first success."""
    before = stored_messages(database)
    with in_background(LIVE_RUNS, _live_runs(url, database.token, prefix)) as live:
        wait_for(lambda: _streaming(database, prefix), timeout=20, what="the runs to stream")
        returned_at = fault()
        recovered, _failures = recovery_after(
            returned_at,
            lambda index: v2_run(url, database.token, f"{prefix}-after-{index}", "Hello?"),
        )
        for future in live:
            _ended_clearly(future.result(timeout=60))
    _reap(database)
    assert_runs_ended_with_codes(database)
    after = stored_messages(database)
    assert before <= after, f"lost: {sorted(before - after)[:5]}"
    return recovered


def _exercise(database: FaultDatabase, url: str, shape: str) -> dict[str, float]:
    warm = v2_run(url, database.token, f"{shape}-warm", "Warm up.")
    assert warm.succeeded, (warm.status, warm.body, warm.types)

    def terminate() -> float:
        assert database.terminate_backends() > 0
        return time.monotonic()

    def restart() -> float:
        database.halt()
        down_until = time.monotonic() + OUTAGE_SECONDS
        while time.monotonic() < down_until:
            # While it is down: the protocol's clear error, quickly.
            assert_clear(v2_run(url, database.token, f"{shape}-down", "Anyone?", timeout=10))
        database.resume()
        return time.monotonic()

    recoveries = {
        "terminate": _fault_then_recover(
            database=database, url=url, prefix=f"{shape}-terminated", fault=terminate
        ),
        "restart": _fault_then_recover(
            database=database, url=url, prefix=f"{shape}-restarted", fault=restart
        ),
    }
    for fault, seconds in recoveries.items():
        # The figure docs/production.md quotes (pytest -s shows it).
        print(f"recovery: {shape} shape, database {fault}: first success after {seconds:.2f} s")
        assert seconds < RECOVERY_SECONDS
    ready = httpx.get(f"{url}/readyz", timeout=10)
    assert ready.status_code == 200, ready.text
    return recoveries


def test_an_inline_web_process_serves_again_after_the_database_returns(
    fault_database: FaultDatabase, runtime_web: Any
) -> None:
    web = runtime_web(executor="inline")
    _exercise(fault_database, web.url, "inline")
    assert "Traceback" not in web.stdout_text()


def test_web_and_worker_serve_again_after_the_database_returns(
    fault_database: FaultDatabase,
    fault_redis: RedisServer,
    runtime_web: Any,
    runtime_worker: Any,
) -> None:
    worker = runtime_worker(redis_url=fault_redis.url)
    web = runtime_web(executor="celery", redis_url=fault_redis.url)
    _exercise(fault_database, web.url, "celery")
    assert worker.process.poll() is None, worker.log_text()[-3000:]


def test_live_celery_streams_go_on_while_the_database_is_down(
    fault_database: FaultDatabase,
    fault_redis: RedisServer,
    runtime_web: Any,
    runtime_worker: Any,
) -> None:
    """PostgreSQL down, Redis up: a follower relays from the channel layer instead of ending
    its client's stream with RELAY_FAILED, and reads the log again once it answers."""
    runtime_worker(redis_url=fault_redis.url)
    web = runtime_web(executor="celery", redis_url=fault_redis.url)
    prefix = "celery-outage-relay"
    # Tokens further apart than a follower's idle check (a second): each gap makes it look
    # at the log and the run's liveness, which the outage refuses.
    slow = {"tokens": 8, "delay_ms": 1200}
    with in_background(
        1, lambda index: v2_run(web.url, fault_database.token, f"{prefix}-{index}", fake(slow), 60)
    ) as live:
        wait_for(
            lambda: logged_deltas(fault_database, f"{prefix}-0") >= 1,
            timeout=20,
            what="the run to stream",
        )
        fault_database.halt()
        try:
            # Longer than a follower's idle check (a second), shorter than a run's staleness.
            down_until = time.monotonic() + OUTAGE_SECONDS
            while time.monotonic() < down_until:
                assert_clear(v2_run(web.url, fault_database.token, "down", "Anyone?", 10))
        finally:
            fault_database.resume()
        answer = live[0].result(timeout=60)
    # The whole reply, in order, though the log could not be read for two seconds of it.
    assert answer.succeeded, (answer.error_code, answer.events[-3:])
    assert answer.text.split() == [f"t{i}" for i in range(slow["tokens"])]
