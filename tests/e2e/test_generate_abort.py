"""``generateCopilotResponse`` end to end: the client stops a turn (aborts its fetch).

A v1 client's only stop signal is the abort, so the served process must cancel the run, close
its upstream request, and keep what was produced so far. The real CopilotKit client (both
pinned versions) aborts the way the stop button does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import RunStatus
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.client_capture import warm_up
from tests.support.generate_e2e import (
    deterministic_tokens,
    finished_run,
    generate_command,
    generate_data,
    replayed_text,
    run_events,
    server_env,
    text_input,
    thread_rows,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

versions = pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)

# Long enough that the reply cannot finish before the abort (200 x 40 ms = 8 s).
SLOW_REPLY_TOKENS = 200
SLOW_TOKEN_DELAY_MS = 40
UPSTREAM_CLOSE_TIMEOUT_S = 5.0


@pytest.fixture
def server(shared_live_server_factory: Any, fake_upstream: FakeUpstream) -> ServedProcess:
    served = shared_live_server_factory(env=server_env(fake_upstream.base_url))
    # Aborts after a fixed time must land after the first part, not in a cold start.
    warm_up(served.url, fake_upstream, version=JS_CLIENT_VERSIONS[0])
    return served


def wait_for_upstream_closed(fake_upstream: FakeUpstream) -> None:
    wait_for(
        lambda: fake_upstream.stats()["client_closed"] >= 1,
        timeout=UPSTREAM_CLOSE_TIMEOUT_S,
        what="the fake upstream to see its connection closed",
    )


@versions
def test_abort_while_the_upstream_hangs_cancels_the_run(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script({"hang": True})
    thread_id = f"thread-abort-hang-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Think hard")])

    result = run_js(version, generate_command(server.url, data, abortAfterMs=1000))

    assert result["aborted"] is True
    # Nothing but the first part (threadId, runId) was sent before the abort.
    assert result["final"]["threadId"] == thread_id
    assert result["final"]["messages"] == []
    # An abort is what the stop button does: the client does not report it as an error.
    assert result["errors"] == []
    wait_for_upstream_closed(fake_upstream)
    assert fake_upstream.stats()["completed"] == 0

    run = finished_run(result["final"]["runId"])
    assert run.status == RunStatus.CANCELLED
    assert run.error_code == "CANCELLED"
    # What existed before the abort stays: the thread and the user's message.
    assert [(row.message_id, row.content) for row in thread_rows(thread_id)] == [
        ("u1", "Think hard")
    ]
    events = run_events(run.id)
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    assert events[-1].type == "run_finished"
    assert events[-1].payload["status"] == "cancelled"


@versions
def test_abort_mid_reply_keeps_the_partial_text_marked_failed(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script({"tokens": SLOW_REPLY_TOKENS, "delay_ms": SLOW_TOKEN_DELAY_MS})
    thread_id = f"thread-abort-slow-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Count slowly")])

    result = run_js(
        version, generate_command(server.url, data, abortAfterFirstMessage=True), timeout=30
    )

    assert result["aborted"] is True
    assert result["errors"] == []
    assert result["firstMessageMs"] is not None
    assert result["totalMs"] < SLOW_REPLY_TOKENS * SLOW_TOKEN_DELAY_MS
    (seen,) = result["final"]["messages"]
    assert "status" not in seen  # the client left before the message finished
    wait_for_upstream_closed(fake_upstream)

    run = finished_run(result["final"]["runId"])
    assert run.status == RunStatus.CANCELLED
    full_reply = deterministic_tokens(SLOW_REPLY_TOKENS)
    user_row, partial = thread_rows(thread_id)
    assert user_row.message_id == "u1"
    assert partial.message_id == seen["id"]
    assert partial.role == "assistant"
    assert partial.content, "the text produced before the abort was not stored"
    assert full_reply.startswith(partial.content)
    assert len(partial.content) < len(full_reply)
    assert partial.status == "failed"
    assert "stop" in partial.status_reason.lower()
    # The log holds exactly the stored text, and ends with the cancellation.
    events = run_events(run.id)
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    assert replayed_text(events, partial.message_id) == partial.content
    assert events[-1].type == "run_finished"
    assert events[-1].payload["status"] == "cancelled"


@versions
def test_the_thread_answers_again_after_an_abort(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script({"hang": True}, {"text": "Back again."})
    thread_id = f"thread-abort-resume-{version}"
    first = generate_data(thread_id=thread_id, messages=[text_input("u1", "Think hard")])
    aborted = run_js(version, generate_command(server.url, first, abortAfterMs=800))
    assert finished_run(aborted["final"]["runId"]).status == RunStatus.CANCELLED

    second = generate_data(
        thread_id=thread_id,
        messages=[text_input("u1", "Think hard"), text_input("u2", "Never mind, say hi")],
    )
    result = run_js(version, generate_command(server.url, second))

    assert result["errors"] == []
    assert result["final"]["status"]["code"] == "Success"
    assert "".join(result["final"]["messages"][0]["content"]) == "Back again."
    assert finished_run(result["final"]["runId"]).status == RunStatus.SUCCEEDED
    assert [row.message_id for row in thread_rows(thread_id)][:2] == ["u1", "u2"]
