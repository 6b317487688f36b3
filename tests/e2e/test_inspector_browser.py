"""The session inspector in a real headless Chromium (Debian's ``chromium``, driven by
Playwright's library from ``tests/e2e/js/browser``; no browser is ever downloaded).

A staff user logs in to the admin and opens two threads: one built with tool calls, agent
state, an interrupt, a failure and a message containing ``<script>``; one produced by a real
turn of the CopilotKit client with a server action, traced by the served process. Screenshots
of each thread page and its waterfall are saved under ``$SCREENSHOT_DIR`` (scripts/test.sh sets
it to ``artifacts/screenshots``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from conversations.models import Span
from tests.conversations.inspector_data import SCRIPT_MESSAGE, inspected_thread_create
from tests.e2e.browser_driver import run_browser_script
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    finished_run,
    generate_command,
    generate_data,
    server_env,
    text_input,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

PASSWORD = "inspector-password-123"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def screenshot_dir(tmp_path: Path) -> Path:
    configured = os.environ.get("SCREENSHOT_DIR")
    folder = Path(configured) if configured else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def drive_browser(command: dict[str, Any]) -> dict[str, Any]:
    return run_browser_script("inspector.cjs", command)


def inspect_path(thread_pk: int, **params: str) -> str:
    url = reverse("admin:conversations_thread_inspect", args=[thread_pk])
    return f"{url}?{urlencode(params)}" if params else url


def test_the_inspector_in_a_real_browser(
    live_server_factory: Any, fake_upstream: FakeUpstream, screenshot_dir: Path
) -> None:
    get_user_model().objects.create_superuser(
        username="inspector", email="inspector@example.com", password=PASSWORD
    )
    built = inspected_thread_create()
    server = live_server_factory(env=server_env(fake_upstream.base_url))
    # A real turn: the client calls the runtime, the model calls a server action.
    fake_upstream.script(
        {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 20, "b": 22}}]},
        {"text": "It is 42."},
    )
    data = generate_data(
        thread_id="browser-real-turn",
        messages=[text_input("u1", "Add <i>20</i> and 22 for me")],
    )
    result = run_js(JS_CLIENT_VERSIONS[0], generate_command(server.url, data))
    run = finished_run(result["final"]["runId"])
    wait_for(lambda: Span.objects.filter(run=run).count() >= 4, what="the real turn's spans")

    browsed = drive_browser(
        {
            "baseUrl": server.url,
            "username": "inspector",
            "password": PASSWORD,
            "screenshotDir": str(screenshot_dir),
            "pages": [
                {"name": "built", "path": inspect_path(built.thread.pk, run="run-first")},
                {"name": "real-turn", "path": inspect_path(run.thread_id)},
            ],
        }
    )

    assert browsed["login"]["url"].endswith("/admin/")
    built_page, real_page = browsed["pages"]
    assert built_page["status"] == 200 and real_page["status"] == 200

    # The transcript reads like the conversation.
    texts = [entry["text"] for entry in built_page["transcriptEntries"]]
    joined = "\n".join(texts)
    for expected in (
        "Plan a weekend in Lisbon",
        "Tool call lookupWeather",
        "Agent state · travel",
        "Shall I book the hotel?",
        "Interrupt · LangGraphInterruptEvent",
        "Answer to the interrupt · LangGraphInterruptEvent",
        "The run failed · UPSTREAM_SERVER_ERROR",
    ):
        assert expected in joined, expected
    assert any('"forecast": "sunny"' in text for text in built_page["toolResults"])
    assert "days changed: 3 (was 2)" in built_page["stateChanges"]
    assert len(built_page["runMarkers"]) == 2
    superseded = [e for e in built_page["transcriptEntries"] if "ins-superseded" in e["classes"]]
    assert len(superseded) == 1 and "An older answer" in superseded[0]["text"]

    # The message with a script is shown as text, and nothing ran.
    assert any(SCRIPT_MESSAGE in text for text in texts)
    assert built_page["injectedScripts"] == 0
    assert built_page["injectedBold"] == 0
    assert browsed["dialogs"] == []

    # The waterfall: a nested timeline to scale, errors and open spans marked.
    rows = built_page["waterfall"]
    assert built_page["waterfallTitle"] == "Spans of run run-first"
    assert [row["kind"] for row in rows] == ["agent", "generation", "tool", "generation", "tool"]
    weather = rows[2]
    assert weather["isError"] and not rows[1]["isError"]
    assert rows[4]["isIncomplete"]
    # The run lasted 2.5 s; the weather tool ran from 0.5 s to 1.0 s.
    assert rows[0]["width"] == pytest.approx(1.0, abs=0.01)
    assert weather["left"] == pytest.approx(0.2, abs=0.01)
    assert weather["width"] == pytest.approx(0.2, abs=0.01)
    assert weather["barColor"] != rows[1]["barColor"]  # red, not the model call's blue
    assert "error.type" in built_page["openedDetails"]

    # The real turn's trace: a run, two model calls and the server action between them.
    assert [row["kind"] for row in real_page["waterfall"]] == [
        "run",
        "generation",
        "tool",
        "generation",
    ]
    assert "execute_tool serverAdd" in real_page["waterfall"][2]["name"]
    assert not any(row["isError"] or row["isIncomplete"] for row in real_page["waterfall"])
    real_texts = "\n".join(e["text"] for e in real_page["transcriptEntries"])
    assert "Add <i>20</i> and 22 for me" in real_texts
    assert "It is 42." in real_texts

    # Screenshots of each thread page and its waterfall.
    shots = [Path(p) for page in browsed["pages"] for p in page["screenshots"]]
    assert {shot.name for shot in shots} == {
        "built-thread.png",
        "built-waterfall.png",
        "real-turn-thread.png",
        "real-turn-waterfall.png",
    }
    for shot in shots:
        assert shot.parent == screenshot_dir
        content = shot.read_bytes()
        assert content.startswith(PNG_MAGIC) and len(content) > 5000, shot
