"""One worker process with the threads pool (the standalone site's default) executes several
runs at once on its event loop, each while the others wait on their model."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import redis

from conversations.models import RunStatus
from tests.e2e.celery.support import converse_v1, in_background, log_entries, run_of_thread
from tests.support.generate_e2e import (
    finished_run,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

# Serial: "every run in progress at one moment" is a claim about timing, and beside the lane's
# 300-stream load test the niced parallel run was starved long enough to break it.
pytestmark = [pytest.mark.e2e, pytest.mark.serial]

CONVERSATIONS = 4
WORDS = 12
# ~1.9 s per reply: the window in which all four must be in progress at once has to outlast
# the skew between their starts on a loaded two-core machine (0.7 s did not, once in a run).
TOKEN_DELAY_MS = 150
SLOW_TOKEN_DELAY_MS = 200  # ~2.6 s: told to stop mid-reply


def worker_children(pid: int) -> list[str]:
    """The pids of ``pid``'s child processes (a prefork worker's pool)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return path.read_text().split()


def answer(index: int) -> str:
    return " ".join([f"threads-{index}"] + [f"w{index}.{word}" for word in range(WORDS)])


# On: the standalone site's way. Off: every library's public API only, as with releases the
# fast lane was not tested with (copilot_runtime/fastlane): kombu's own transport, Celery's own
# strategy (each run task on a pool thread), the channel layer's group_send and new_channel,
# the claim in the database, strawberry's schema assembled again.
@pytest.mark.parametrize("fast_lane", ["true", "false"], ids=["fast-lane", "public-apis"])
def test_one_threads_pool_process_streams_several_runs_at_once(
    live_server_factory: Any,
    celery_worker_factory: Any,
    celery_env: Any,
    redis_url: str,
    fake_upstream: FakeUpstream,
    fast_lane: str,
) -> None:
    env = celery_env(redis_url, COPILOT_RUNTIME_FAST_LANE=fast_lane)
    worker = celery_worker_factory(env=env, pool="threads", concurrency=CONVERSATIONS)
    assert not worker_children(worker.process.pid)
    server = live_server_factory(env=env)

    def converse(index: int) -> tuple[str, str | None, str]:
        directive = {"text": answer(index), "delay_ms": TOKEN_DELAY_MS}
        return converse_v1(server.url, thread_id=f"threads-pool-{index}", directive=directive)

    with ThreadPoolExecutor(max_workers=CONVERSATIONS) as pool:
        replies = list(pool.map(converse, range(CONVERSATIONS)))

    runs = []
    for index, (run_id, status, text) in enumerate(replies):
        assert (status, text) == ("Success", answer(index)), index
        runs.append(finished_run(run_id))
    assert all(run.status == RunStatus.SUCCEEDED for run in runs)
    # One process (no pool children), and every run was in progress at one moment: they ran
    # side by side, not one after the other.
    wait_for(lambda: len(worker.executed_runs()) == CONVERSATIONS, timeout=5, what="the task log")
    assert max(run.started_at for run in runs) < min(run.finished_at for run in runs)
    # Every follower left its run's group: nothing stays subscribed in Redis once the runs
    # are over (an interrupted leave kept most of them, one per followed run).
    client = redis.Redis.from_url(redis_url)
    try:
        wait_for(
            lambda: not client.pubsub_channels("asgi__group__run.*"),
            timeout=5,
            what="the run groups to be left",
        )
    finally:
        client.close()

    # Stopped, it closes what its loop opened (the model's HTTP pool, the database pools).
    worker.stop()
    assert worker.process.returncode == 0
    assert "Unclosed" not in worker.log_text()


def test_a_threads_pool_worker_told_to_stop_ends_its_run_before_it_exits(
    live_server_factory: Any,
    celery_worker_factory: Any,
    celery_env: Any,
    redis_url: str,
    fake_upstream: FakeUpstream,
) -> None:
    # The consumer starts runs on the run loop itself (copilot_runtime/fastlane/celery.py), so
    # Celery's pool has nothing to wait for: the process waits for the runs it started.
    env = celery_env(redis_url)
    worker = celery_worker_factory(env=env, pool="threads", concurrency=2)
    server = live_server_factory(env=env)
    thread_id = "threads-pool-warm-shutdown"
    directive = {"text": answer(0), "delay_ms": SLOW_TOKEN_DELAY_MS}

    with in_background(
        lambda: converse_v1(server.url, thread_id=thread_id, directive=directive)
    ) as reply:

        def streaming() -> bool:
            run = run_of_thread(thread_id)
            return run is not None and any(
                kind == "text_delta" for _, kind, _ in log_entries(run.pk)
            )

        wait_for(streaming, timeout=15, what="the worker to stream text")
        worker.stop(grace_seconds=30)  # SIGTERM: Celery's warm shutdown
        run_id, status, text = reply.result(timeout=30)

    assert worker.process.returncode == 0
    assert (status, text) == ("Success", answer(0))
    assert finished_run(run_id).status == RunStatus.SUCCEEDED
    assert worker.executed_runs() == ["succeeded"]
    assert "Unclosed" not in worker.log_text()
