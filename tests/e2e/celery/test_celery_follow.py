"""Following a worker's run from a second process while daphne streams it to the client.

The second follower attaches mid-run, either from a second daphne (the ``runEvents``
subscription over a websocket) or from this test process itself (``follow_run`` through the
same Redis channel layer and Postgres log a web process uses). Both must see the whole stream:
exactly the worker's log, from seq 1, no gap, no repeat.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import RunStatus
from copilot_runtime.runs import relay
from tests.e2e.celery.raw_websocket import subscribe
from tests.e2e.celery.support import (
    fake,
    follow_in_process,
    in_background,
    log_entries,
    redis_channel_layer,
    run_of_thread,
)
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    deterministic_tokens,
    finished_run,
    generate_command,
    generate_data,
    joined_content,
    text_input,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

TOKENS = 40
TOKEN_DELAY_MS = 40  # 1.6 s of streaming: time to attach mid-run
RUN_EVENTS = """
subscription Follow($runId: String!) {
  runEvents(runId: $runId) { sequence type delta raw }
}
"""


def slow_reply_data(thread_id: str) -> dict[str, Any]:
    return generate_data(
        thread_id=thread_id,
        messages=[text_input("u1", fake({"tokens": TOKENS, "delay_ms": TOKEN_DELAY_MS}))],
    )


def streaming_run_of(thread_id: str) -> Any:
    """The thread's run once the worker has logged its first tokens (and not finished)."""

    def started_streaming() -> Any:
        run = run_of_thread(thread_id)
        if run is None or not any(kind == "text_delta" for _, kind, _ in log_entries(run.pk)):
            return None
        # Read again: the row read before the log may predate the write that logged the tokens.
        return run_of_thread(thread_id)

    run = wait_for(started_streaming, timeout=15, what="the worker to stream the first tokens")
    assert run.status == RunStatus.RUNNING
    return run


def assert_client_got_the_whole_reply(result: dict[str, Any], run_id: str) -> None:
    assert result["errors"] == []
    assert result["final"]["status"]["code"] == "Success"
    assert result["final"]["runId"] == run_id
    (reply,) = result["final"]["messages"]
    assert joined_content(reply) == deterministic_tokens(TOKENS)


def test_a_second_daphne_attaching_mid_run_over_a_websocket_sees_the_whole_stream(
    celery_stack: Any, live_server_factory: Any, celery_env: Any, redis_url: str
) -> None:
    first, _worker = celery_stack(redis_url)
    second = live_server_factory(env=celery_env(redis_url))
    thread_id = "celery-attach-websocket"
    command = generate_command(first.url, slow_reply_data(thread_id))

    with in_background(lambda: run_js(JS_CLIENT_VERSIONS[0], command)) as client:
        run = streaming_run_of(thread_id)
        attached = asyncio.run(
            subscribe(second.url.replace("http", "ws"), RUN_EVENTS, {"runId": run.pk})
        )
        result = client.result(timeout=30)

    assert_client_got_the_whole_reply(result, run.pk)
    assert finished_run(run.pk).status == RunStatus.SUCCEEDED
    followed = [
        (
            payload["data"]["runEvents"]["sequence"],
            payload["data"]["runEvents"]["type"],
            payload["data"]["runEvents"]["raw"],
        )
        for payload in attached
    ]
    assert followed == log_entries(run.pk)
    assert followed[-1][1:] == ("run_finished", {"status": "succeeded"})
    text = "".join(p["data"]["runEvents"]["delta"] or "" for p in attached)
    assert text == deterministic_tokens(TOKENS)


def test_a_follower_in_another_process_attaching_mid_run_sees_the_whole_stream(
    celery_stack: Any,
    redis_url: str,
    fake_upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _worker = celery_stack(redis_url)
    thread_id = "celery-follow-mid-run"
    read_from_log: list[int] = []
    original_log_fetch = relay.log_fetch

    async def counting_log_fetch(**kwargs: Any) -> list[Any]:
        rows = await original_log_fetch(**kwargs)
        read_from_log.extend(row.seq for row in rows)
        return rows

    monkeypatch.setattr(relay, "log_fetch", counting_log_fetch)
    command = generate_command(server.url, slow_reply_data(thread_id))

    with in_background(lambda: run_js(JS_CLIENT_VERSIONS[0], command)) as client:
        run = streaming_run_of(thread_id)
        with redis_channel_layer(redis_url):
            followed = follow_in_process(run.pk)
        result = client.result(timeout=30)

    assert_client_got_the_whole_reply(result, run.pk)
    # The second follower saw exactly the logged stream: from seq 1, no gap, no repeat.
    assert finished_run(run.pk).status == RunStatus.SUCCEEDED
    assert followed == log_entries(run.pk)
    assert [seq for seq, _, _ in followed] == list(range(1, len(followed) + 1))
    assert followed[-1][1:] == ("run_finished", {"status": "succeeded"})
    followed_text = "".join(
        payload["delta"] for _, kind, payload in followed if kind == "text_delta"
    )
    assert followed_text == deterministic_tokens(TOKENS)
    # It attached late (the beginning came from the log) and then followed live (the rest
    # came from the layer).
    assert read_from_log[:1] == [1]
    assert len(set(read_from_log)) < len(followed)
