"""CopilotKit v2 on the Celery executor: the real v2 frontend core against daphne with a worker.

A v2 run is executed by the worker like any run; its events reach the client through the log
and Redis; ``/stop`` reaches the worker; ``connect`` follows a worker's run from another page.
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from django.db import connections

from conversations.models import Message, Run, RunStatus
from tests.e2e.agui_client import run_agui, step_types
from tests.e2e.celery.support import fake
from tests.support.generate_e2e import deterministic_tokens, finished_run, wait_for

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e


def command(server: Any, thread_id: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {
        "runtimeUrl": f"{server.url}/api/copilotkit",
        "agentId": "default",
        "threadId": thread_id,
        "steps": list(steps),
    }


def test_a_v2_run_executes_on_the_worker(
    celery_stack: Any, redis_url: str, fake_upstream: FakeUpstream
) -> None:
    server, worker = celery_stack(redis_url)
    thread_id = f"celery-agui-{uuid.uuid4()}"

    result = run_agui(
        command(
            server,
            thread_id,
            {"op": "run", "message": {"id": "u1", "content": fake({"tokens": 30})}},
        )
    )

    [step] = result["steps"]
    assert step.get("error") is None, result["stderr"]
    assert step_types(step)[0] == "RUN_STARTED"
    assert step_types(step)[-1] == "RUN_FINISHED"
    text = "".join(e["delta"] for e in step["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == deterministic_tokens(30)
    run_id = step["events"][0]["runId"]
    run = finished_run(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.protocol == "agui"
    wait_for(lambda: "succeeded" in worker.executed_runs(), timeout=10, what="the worker task")


def test_stop_reaches_the_workers_run_and_connect_follows_it(
    celery_stack: Any, redis_url: str, fake_upstream: FakeUpstream
) -> None:
    server, _worker = celery_stack(redis_url)
    thread_id = f"celery-agui-stop-{uuid.uuid4()}"
    outcome: dict[str, Any] = {}

    def follow() -> None:
        try:
            wait_for(
                lambda: Run.objects.filter(thread__thread_id=thread_id, status="running").exists(),
                timeout=15,
                what="the worker's run to start",
            )
        finally:
            connections.close_all()  # this thread's own connection
        outcome["connected"] = run_agui(command(server, thread_id, {"op": "connect"}))

    follower = threading.Thread(target=follow)
    follower.start()
    stopped = run_agui(
        command(
            server,
            thread_id,
            {
                "op": "stop",
                "message": {"id": "u1", "content": fake({"tokens": 400, "delay_ms": 40})},
                "afterContentEvents": 20,
            },
        )
    )
    follower.join(60)

    [step] = stopped["steps"]
    assert step.get("error") is None, stopped["stderr"]
    stop = next(e for e in stopped["http"] if "/stop/" in e["url"])
    assert stop["status"] == 200
    run = finished_run(stop["requestBody"]["runId"])
    assert run.status == RunStatus.CANCELLED
    assert fake_upstream.stats()["client_closed"] >= 1
    [connect_step] = outcome["connected"]["steps"]
    types = step_types(connect_step)
    assert types[0] == "RUN_STARTED"
    assert types[-1] == "RUN_FINISHED"
    followed = "".join(
        e["delta"] for e in connect_step["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"
    )
    stored = Message.objects.get(thread__thread_id=thread_id, role="assistant")
    assert followed == stored.content
    assert deterministic_tokens(400).startswith(followed)
