"""Stopping a worker's run: the client's abort cancels it; a killed worker never hangs it.

A v1 client's only stop signal is aborting its fetch: the web process must reach the worker,
which closes its upstream request and keeps the partial answer. A worker SIGKILLed mid-turn
stops renewing its heartbeat; the follower in the web process then fails the run with
``WORKER_LOST`` and the client sees ``MESSAGE_STREAM_INTERRUPTED``, within seconds.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Message, RunStatus
from copilot_runtime.runs.relay import IDLE_CHECK_SECONDS
from tests.e2e.celery.conftest import RUN_STALE_SECONDS
from tests.e2e.celery.support import fake, in_background, log_entries, run_of_thread
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    deterministic_tokens,
    finished_run,
    generate_command,
    generate_data,
    text_input,
    thread_rows,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

CLIENT = JS_CLIENT_VERSIONS[0]
# Far longer than the tests wait: the reply cannot finish on its own (200 x 50 ms = 10 s).
SLOW_REPLY = {"tokens": 200, "delay_ms": 50}
CANCEL_BOUND_SECONDS = 5.0


def test_the_client_aborting_cancels_the_workers_turn_and_keeps_the_partial_text(
    celery_stack: Any, redis_url: str, fake_upstream: FakeUpstream
) -> None:
    server, worker = celery_stack(redis_url)
    thread_id = "celery-abort"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", fake(SLOW_REPLY))])

    result = run_js(CLIENT, generate_command(server.url, data, abortAfterFirstMessage=True))
    aborted_at = time.monotonic()

    assert result["aborted"] is True
    assert result["errors"] == []
    (seen,) = result["final"]["messages"]
    # The worker closes its upstream request promptly.
    wait_for(
        lambda: fake_upstream.stats()["client_closed"] >= 1,
        timeout=CANCEL_BOUND_SECONDS,
        what="the worker to close its upstream request",
    )
    run = finished_run(result["final"]["runId"], timeout=CANCEL_BOUND_SECONDS)
    assert time.monotonic() - aborted_at < CANCEL_BOUND_SECONDS
    assert run.status == RunStatus.CANCELLED
    assert run.error_code == "CANCELLED"
    assert fake_upstream.stats()["completed"] == 0

    user_row, partial = thread_rows(thread_id)
    assert user_row.message_id == "u1"
    assert partial.message_id == seen["id"]
    assert partial.content, "the text produced before the abort was not stored"
    assert deterministic_tokens(200).startswith(partial.content)
    assert len(partial.content) < len(deterministic_tokens(200))
    assert partial.status == "failed"
    log = log_entries(run.pk)
    assert [seq for seq, _, _ in log] == list(range(1, len(log) + 1))
    logged_text = "".join(p["delta"] for _, kind, p in log if kind == "text_delta")
    assert logged_text == partial.content
    assert log[-1][1:] == ("run_finished", {"status": "cancelled"})
    # The worker ended the task itself, as cancelled: it was not killed or left hanging.
    wait_for(lambda: worker.executed_runs(), timeout=5, what="the worker to end its task")
    assert worker.executed_runs() == ["cancelled"]


def test_a_worker_killed_mid_turn_ends_the_stream_as_interrupted_and_keeps_what_was_stored(
    celery_stack: Any, redis_url: str, fake_upstream: FakeUpstream
) -> None:
    server, worker = celery_stack(redis_url)
    thread_id = "celery-killed"
    add = {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 2}}]}
    directive = {"steps": [add, SLOW_REPLY]}
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", fake(directive))])

    with in_background(lambda: run_js(CLIENT, generate_command(server.url, data))) as client:

        def streaming_text() -> Any:
            run = run_of_thread(thread_id)
            if run is None:
                return None
            log = log_entries(run.pk)
            return (run, log) if sum(kind == "text_delta" for _, kind, _ in log) >= 2 else None

        run, _ = wait_for(streaming_text, timeout=15, what="the worker to stream text")
        worker.kill()
        killed_at = time.monotonic()
        logged_before = log_entries(run.pk)
        stored_before = list(
            Message.objects.filter(thread__thread_id=thread_id)
            .order_by("position")
            .values_list("message_id", "kind", "content", "arguments", "result", "status")
        )
        result = client.result(timeout=30)
        ended_after = time.monotonic() - killed_at

    # The client was not left hanging: it got the run's end as an interrupted stream.
    bound = RUN_STALE_SECONDS + IDLE_CHECK_SECONDS + 2.0
    assert ended_after < bound, f"the stream ended {ended_after:.1f}s after the kill"
    status = result["final"]["status"]
    assert status["code"] == "Failed"
    assert status["reason"] == "MESSAGE_STREAM_INTERRUPTED"
    assert status["details"]["code"] == "WORKER_LOST"
    # What the client had already received stays in its messages.
    call, action_result, text = result["final"]["messages"]
    assert (call["name"], action_result["result"]) == ("serverAdd", '{"sum":3}')
    assert deterministic_tokens(200).startswith("".join(text["content"]))

    failed = finished_run(run.pk)
    assert failed.status == RunStatus.FAILED
    assert failed.error_code == "WORKER_LOST"
    # Everything logged before the kill is still there, followed by the reaper's two events.
    log = log_entries(run.pk)
    assert log[: len(logged_before)] == logged_before
    (error_seq, error_type, error), (finished_seq, finished_type, finished) = log[
        len(logged_before) :
    ]
    assert (error_seq, finished_seq) == (len(logged_before) + 1, len(logged_before) + 2)
    assert (error_type, error["code"]) == ("run_error", "WORKER_LOST")
    assert (finished_type, finished) == ("run_finished", {"status": "failed"})
    # So are the stored messages: the question, the tool call and its result.
    stored_after = list(
        Message.objects.filter(thread__thread_id=thread_id)
        .order_by("position")
        .values_list("message_id", "kind", "content", "arguments", "result", "status")
    )
    assert stored_after[: len(stored_before)] == stored_before
    assert [row[1] for row in stored_before] == ["text", "action_execution", "result"]
    # And the answer the worker was streaming when it died is stored too, marked failed, with
    # the text the log holds (as a cancelled run's partial answer is).
    (partial,) = stored_after[len(stored_before) :]
    _, kind, content, _, _, message_status = partial
    assert (kind, message_status) == ("text", "failed")
    logged_text = "".join(
        payload["delta"] for _, entry, payload in logged_before if entry == "text_delta"
    )
    assert content == logged_text and content


def test_a_run_over_its_time_limit_is_ended_by_the_worker_itself(
    celery_stack: Any, redis_url: str, fake_upstream: FakeUpstream
) -> None:
    limit = 2.0
    # The reaper would only step in after 10 s: whatever ends the run sooner is the worker.
    server, _worker = celery_stack(
        redis_url,
        COPILOT_RUNTIME_RUN_TIME_LIMIT_SECONDS=str(limit),
        COPILOT_RUNTIME_RUN_STALE_SECONDS="10",
    )
    thread_id = "celery-time-limit"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", fake(SLOW_REPLY))])

    started = time.monotonic()
    result = run_js(CLIENT, generate_command(server.url, data), timeout=30)
    elapsed = time.monotonic() - started

    assert elapsed < limit + CANCEL_BOUND_SECONDS, f"the client waited {elapsed:.1f}s"
    assert result["final"]["status"]["code"] == "Failed"
    run = finished_run(result["final"]["runId"])
    assert run.status in {RunStatus.FAILED, RunStatus.CANCELLED}
    assert run.error_code != "WORKER_LOST"
    # The upstream notices the closed connection on its next write.
    wait_for(
        lambda: fake_upstream.stats()["client_closed"] >= 1,
        what="the upstream request to be closed",
    )
    # What was produced within the limit is kept, as for any stopped run.
    _user, partial = thread_rows(thread_id)
    assert partial.content and deterministic_tokens(200).startswith(partial.content)
    assert partial.status == "failed"
    assert log_entries(run.pk)[-1][1] == "run_finished"


def test_a_run_no_worker_starts_ends_with_a_clear_error(
    live_server_factory: Any, celery_env: Any, redis_url: str
) -> None:
    # The celery executor with a broker and no worker: the run is stored pending and enqueued,
    # and nobody takes it. The client is told, and the thread is free again.
    timeout = 2.0
    env = celery_env(redis_url, COPILOT_RUNTIME_PENDING_TIMEOUT_SECONDS=str(timeout))
    server = live_server_factory(env=env)
    thread_id = "celery-no-worker"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", fake({"tokens": 3}))])

    started = time.monotonic()
    result = run_js(CLIENT, generate_command(server.url, data), timeout=30)
    elapsed = time.monotonic() - started

    assert elapsed < timeout + IDLE_CHECK_SECONDS + 3.0, f"the client waited {elapsed:.1f}s"
    status = result["final"]["status"]
    assert status["code"] == "Failed"
    assert status["details"]["code"] == "RUN_NOT_STARTED"
    run = finished_run(result["final"]["runId"])
    assert (run.status, run.error_code) == (RunStatus.FAILED, "RUN_NOT_STARTED")
    assert run.thread.status == "idle"
