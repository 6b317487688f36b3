"""Scale-out: two daphne processes and two Celery workers on one Postgres and one Redis.

Six conversations at once, spread over both web processes, each answered with its own text;
the runs are executed by both workers and relayed by whichever web process took the request.
The requests are the real client's (``converse_v1``: its captured document and headers).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import RunStatus
from tests.e2e.celery.support import converse_v1
from tests.support.generate_e2e import (
    finished_run,
    thread_rows,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

CONVERSATIONS = 6
WORDS = 12
TOKEN_DELAY_MS = 60  # ~0.7 s per reply: the conversations overlap


def answer(index: int) -> str:
    return " ".join([f"conversation-{index}"] + [f"w{index}.{word}" for word in range(WORDS)])


def test_two_web_processes_and_two_workers_serve_concurrent_conversations(
    live_server_factory: Any,
    celery_worker_factory: Any,
    celery_env: Any,
    redis_url: str,
    fake_upstream: FakeUpstream,
) -> None:
    env = celery_env(redis_url)
    workers = [celery_worker_factory(env=env, name=name) for name in ("w1", "w2")]
    servers = [live_server_factory(env=env) for _ in range(2)]

    def converse(index: int) -> tuple[str, str | None, str]:
        directive = {"text": answer(index), "delay_ms": TOKEN_DELAY_MS}
        server = servers[index % len(servers)]
        return converse_v1(server.url, thread_id=f"scale-out-{index}", directive=directive)

    with ThreadPoolExecutor(max_workers=CONVERSATIONS) as pool:
        replies = list(pool.map(converse, range(CONVERSATIONS)))

    for index, (run_id, status, text) in enumerate(replies):
        assert (status, text) == ("Success", answer(index)), index
        run = finished_run(run_id)
        assert run.status == RunStatus.SUCCEEDED
        assert run.thread.thread_id == f"scale-out-{index}"
        assert [row.content for row in thread_rows(f"scale-out-{index}")][1] == answer(index)
    # Every run was executed once, and both workers took a share.
    wait_for(
        lambda: sum(len(worker.executed_runs()) for worker in workers) == CONVERSATIONS,
        timeout=5,
        what="both workers' task logs",
    )
    shares = [len(worker.executed_runs()) for worker in workers]
    assert all(share >= 1 for share in shares), shares
    assert all(set(worker.executed_runs()) == {"succeeded"} for worker in workers)
