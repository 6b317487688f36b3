"""The demo chat page at ``/`` in a real browser (headless Debian Chromium via playwright-core).

The page talks to the v2 endpoints with ``fetch`` and a streaming reader: a message gets a reply
that streams in token by token (on the offline demo model, as the embedded default serves it),
a reload brings the thread back from the database, and Stop ends a long reply mid-way.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Message, Run, RunStatus
from tests.e2e.agui_client import run_demo_page
from tests.support.generate_e2e import server_env, wait_for

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = pytest.mark.e2e


def test_a_message_streams_a_reply_from_the_offline_demo_model_and_reloads(
    live_server_factory: Any,
) -> None:
    server: ServedProcess = live_server_factory(env={"COPILOT_RUNTIME_MODEL_ADAPTER": "demo"})

    result = run_demo_page(
        {"url": f"{server.url}/", "message": "Hello browser"}, screenshot_name="demo-chat-reply"
    )

    assert result["consoleErrors"] == []
    assert result["errors"] == []
    assert result["offlineNotice"] is True
    thread_id = result["threadId"]
    assert result["adminHref"] == f"/admin/conversations/thread/open/?thread={thread_id}"
    reply = result["reply"]
    assert reply.startswith("[offline demo model]")
    assert reply.endswith("You said: Hello browser")
    # Shown as the tokens arrived: many partial lengths, growing, before the whole reply.
    partial = [length for length in result["snapshots"] if 0 < length < len(reply)]
    assert len(partial) >= 3
    assert partial == sorted(partial)
    assert [m["role"] for m in result["messages"]] == ["user", "assistant"]

    run = wait_for(
        lambda: Run.objects.filter(thread__thread_id=thread_id, status=RunStatus.SUCCEEDED).first(),
        what="the page's run to finish",
    )
    assert run.protocol == "agui"

    reloaded = run_demo_page({"url": f"{server.url}/?thread={thread_id}"})
    assert reloaded["threadId"] == thread_id
    assert reloaded["restored"] == [
        {"role": "user", "text": "Hello browser"},
        {"role": "assistant", "text": reply},
    ]


def test_stop_ends_a_long_reply(live_server_factory: Any, fake_upstream: FakeUpstream) -> None:
    server: ServedProcess = live_server_factory(env=server_env(fake_upstream.base_url))
    long_reply = "FAKE: " + json.dumps({"tokens": 3000, "delay_ms": 10})

    result = run_demo_page({"url": f"{server.url}/", "message": long_reply, "stopAfterChars": 40})

    assert result["consoleErrors"] == []
    assert result["errors"] == []
    assert result["offlineNotice"] is False
    full = " ".join(f"t{i}" for i in range(3000))
    shown = result["reply"]
    assert result["stoppedAtChars"] >= 40
    assert 40 <= len(shown) < len(full)
    assert full.startswith(shown)

    thread_id = result["threadId"]
    run = wait_for(
        lambda: Run.objects.filter(thread__thread_id=thread_id, status=RunStatus.CANCELLED).first(),
        what="the stopped run to be recorded",
    )
    assert run.protocol == "agui"
    stored = Message.objects.get(thread__thread_id=thread_id, role="assistant")
    assert stored.status == "failed"
    assert full.startswith(stored.content)
    assert fake_upstream.stats()["client_closed"] >= 1
