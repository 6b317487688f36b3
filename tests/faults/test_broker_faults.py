"""Redis (the broker and the channel layer) stopped under the Celery shape, for real.

A run asked for while Redis is down is refused at once in the protocol's shape and recorded
failed (its thread is not left busy); live runs end with a clear code; once Redis is back the
service serves again within five seconds, on the same thread too.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.faults.conftest import FaultDatabase
from tests.faults.traffic import (
    GRAPHQL_PATH,
    RECOVERY_SECONDS,
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
from tests.support.generate_e2e import generate_data, text_input
from tests.support.redis_server import RedisServer

pytestmark = [pytest.mark.faults, pytest.mark.serial]


def test_runs_asked_for_while_redis_is_down_are_refused_clearly_and_free_their_thread(
    fault_database: FaultDatabase,
    fault_redis: RedisServer,
    runtime_web: Any,
    runtime_worker: Any,
) -> None:
    worker = runtime_worker(redis_url=fault_redis.url)
    web = runtime_web(executor="celery", redis_url=fault_redis.url)
    token = fault_database.token
    assert v2_run(web.url, token, "broker-warm", "Warm up.").succeeded
    before = stored_messages(fault_database)

    live_directive = {"tokens": 60, "delay_ms": 50}
    with in_background(
        1, lambda _: v2_run(web.url, token, "broker-live", fake(live_directive), 60)
    ) as live:
        wait_for(
            lambda: logged_deltas(fault_database, "broker-live") >= 2,
            timeout=20,
            what="the live run to stream",
        )
        fault_redis.stop()
        try:
            refused = v2_run(web.url, token, "broker-down", "Are you there?", timeout=20)
            assert refused.status == 503, (refused.status, refused.body)
            assert refused.error_code == "NETWORK_ERROR"
            assert "queue" in refused.body
            assert_clear(refused)
            v1 = httpx.post(
                web.url + GRAPHQL_PATH,
                headers={"authorization": f"Bearer {token}"},
                json={
                    "query": "mutation($data: GenerateCopilotResponseInput!) {"
                    " generateCopilotResponse(data: $data) { threadId runId } }",
                    "variables": {
                        "data": generate_data(
                            thread_id="broker-down-v1", messages=[text_input("v1-u1", "Hi?")]
                        )
                    },
                },
                timeout=20,
            )
            assert v1.status_code == 200, v1.text
            codes = [e["extensions"]["code"] for e in v1.json().get("errors") or []]
            assert codes == ["NETWORK_ERROR"], v1.text
        finally:
            fault_redis.start()
        returned_at = time.monotonic()
        # The refused run's thread is free: the same thread serves again at once.
        recovered, _ = recovery_after(
            returned_at,
            lambda index: v2_run(web.url, token, "broker-down", f"Again {index}?"),
        )
        answer = live[0].result(timeout=60)
    print(f"recovery: celery shape, redis stopped: first success after {recovered:.2f} s")
    assert recovered < RECOVERY_SECONDS
    if not answer.succeeded:
        assert_clear(answer)
    refused_runs = fault_database.rows(
        "SELECT r.status, r.error_code FROM conversations_run r "
        "JOIN conversations_thread t ON t.id = r.thread_id "
        "WHERE t.thread_id = 'broker-down' ORDER BY r.created_at LIMIT 1"
    )
    assert refused_runs == [("failed", "BROKER_UNAVAILABLE")]
    assert_runs_ended_with_codes(fault_database)
    assert before <= stored_messages(fault_database)
    assert worker.process.poll() is None, worker.log_text()[-3000:]
