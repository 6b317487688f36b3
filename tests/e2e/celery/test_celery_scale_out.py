"""Scale-out: two daphne processes and two Celery workers on one Postgres and one Redis.

Six conversations at once, spread over both web processes, each answered with its own text;
the runs are executed by both workers and relayed by whichever web process took the request.
The requests are the real client's (its captured document and headers, sent by httpx: six
Node processes at once would cost more than the whole test on two cores).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import httpx
import orjson
import pytest

from benchmarks.response_reader import MultipartMixedParser
from conversations.models import RunStatus
from tests.e2e.celery.support import fake
from tests.e2e.js_client import JS_CLIENT_VERSIONS
from tests.support.client_capture import captured_generate_request
from tests.support.generate_e2e import (
    GRAPHQL_PATH,
    finished_run,
    generate_data,
    text_input,
    thread_rows,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

CONVERSATIONS = 6
WORDS = 12
TOKEN_DELAY_MS = 60  # ~0.7 s per reply: the conversations overlap


def streamed_reply(body: bytes) -> tuple[str, str | None, str]:
    """(run id, response status code, text) from a multipart ``generateCopilotResponse``."""
    run_id, status, text = "", None, []
    for part in MultipartMixedParser().feed(body):
        payload = orjson.loads(part)
        if "data" in payload:
            run_id = payload["data"]["generateCopilotResponse"]["runId"]
        for entry in payload.get("incremental", []):
            if entry["path"][-2:-1] == ["content"]:
                text.extend(entry["items"])
            elif entry["path"] == ["generateCopilotResponse"] and "status" in entry["data"]:
                status = entry["data"]["status"]["code"]
    return run_id, status, "".join(text)


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

    request = captured_generate_request(JS_CLIENT_VERSIONS[0])

    def converse(index: int) -> tuple[str, str | None, str]:
        server = servers[index % len(servers)]
        directive = {"text": answer(index), "delay_ms": TOKEN_DELAY_MS}
        data = generate_data(
            thread_id=f"scale-out-{index}", messages=[text_input("u1", fake(directive))]
        )
        response = httpx.post(
            server.url + GRAPHQL_PATH,
            content=request.body(data),
            headers=request.request_headers(),
            timeout=60,
        )
        assert response.status_code == 200
        return streamed_reply(response.content)

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
