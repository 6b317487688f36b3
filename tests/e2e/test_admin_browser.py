"""The admin's run list, thread list and inspector at 1280 px in a real headless Chromium
(Debian's ``chromium``, driven by Playwright's library from ``tests/e2e/js/browser``), with the
data of real runs: a v2 thread of two turns through the CopilotKit v2 core and a v1 turn through
the GraphQL client, served by the runtime with the fake model. The layout is measured, not
compared as pixels: every key column of the run list lies within the window, the thread list's
Inspect column too with its titles on a line or two, and the inspector names each run's
protocol and executor beside a search box wide enough for its placeholder.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from conversations.models import Run, RunStatus, Thread
from copilot_runtime.models import GuardrailRule
from tests.e2e.agui_client import run_agui
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

PASSWORD = "admin-pages-password-123"
WIDTH = 1280
LONG_TITLE = "Plan a long weekend in Lisbon with museums, food markets and a trip to Sintra"
RUN_KEY_COLUMNS = {
    "created_display",
    "id_display",
    "agent_display",
    "status_display",
    "model",
    "tokens_display",
    "cost_display",
    "latency_display",
    "first_token_display",
    "inspect_link",
}


def drive_browser(command: dict[str, Any]) -> dict[str, Any]:
    return run_browser_script("admin_pages.cjs", command)


def assert_shown(page: dict[str, Any], fields: set[str]) -> None:
    """Each named cell of every row lies within the window and within the table's own
    scrolling box, which has nothing to scroll sideways."""
    edges: dict[str, float] = {}
    for cell in page["cells"]:
        edges[cell["field"]] = max(edges.get(cell["field"], 0), cell["box"]["right"])
    assert fields <= set(edges), (fields - set(edges), page["cells"])
    visible = min(page["viewport"], page["resultsBox"]["right"])
    for field in fields:
        assert edges[field] <= visible + 0.5, (page["name"], field, edges[field], visible)
    scroll = page["resultsScroll"]
    assert scroll["scrollWidth"] <= scroll["clientWidth"], (page["name"], scroll)


def test_the_admin_pages_fit_1280_px_with_real_runs(
    live_server_factory: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    get_user_model().objects.create_superuser(
        username="pages", email="pages@example.com", password=PASSWORD
    )
    server = live_server_factory(env=server_env(fake_upstream.base_url))
    # Real runs: a v1 turn, one the guardrails deny (a failed run with a long error code),
    # then two v2 turns on the thread the lists show first.
    GuardrailRule.objects.create(name="no passwords", kind="deny", match="pattern", text="passw")
    for name, text in (("v1", "Hello there"), ("denied", "my password is hunter2")):
        data = generate_data(thread_id=f"admin-pages-{name}", messages=[text_input("u1", text)])
        v1 = run_js(JS_CLIENT_VERSIONS[0], generate_command(server.url, data))
        finished_run(v1["final"]["runId"])
    thread_id = f"admin-pages-{uuid.uuid4()}"
    v2 = run_agui(
        {
            "runtimeUrl": f"{server.url}/api/copilotkit",
            "agentId": "default",
            "threadId": thread_id,
            "steps": [
                {"op": "run", "message": {"id": "u1", "content": LONG_TITLE}},
                {"op": "run", "message": {"id": "u2", "content": "And on Sunday?"}},
            ],
        }
    )
    assert v2.get("errors", []) == [], v2
    wait_for(
        lambda: (
            Run.objects.filter(thread__thread_id=thread_id, status=RunStatus.SUCCEEDED).count() == 2
        ),
        what="the v2 thread's two runs",
    )
    thread = Thread.objects.get(thread_id=thread_id)
    assert thread.title == LONG_TITLE

    folder = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path)
    browsed = drive_browser(
        {
            "baseUrl": server.url,
            "username": "pages",
            "password": PASSWORD,
            "screenshotDir": str(folder),
            "width": WIDTH,
            "height": 900,
            "pages": [
                {"name": "runs", "path": reverse("admin:conversations_run_changelist")},
                {"name": "threads", "path": reverse("admin:conversations_thread_changelist")},
                {
                    "name": "inspector",
                    "path": reverse("admin:conversations_thread_inspect", args=[thread.pk]),
                },
            ],
        }
    )
    runs, threads, inspector = browsed["pages"]
    assert [page["status"] for page in browsed["pages"]] == [200, 200, 200]
    # The lists leave out the admin's navigation sidebar (the breadcrumbs lead back) for their
    # columns; the inspector keeps it.
    assert not runs["navSidebar"] and not threads["navSidebar"] and inspector["navSidebar"]

    # The run list: four runs, every key column within the window, nothing to scroll sideways.
    assert runs["rows"] == 4
    statuses = [cell["text"] for cell in runs["cells"] if cell["field"] == "status_display"]
    assert any(s.startswith("Failed\nGUARDRAILS_VALIDA") for s in statuses), statuses
    assert runs["viewport"] <= WIDTH and runs["pageWidth"] <= runs["viewport"]
    assert_shown(runs, RUN_KEY_COLUMNS)
    assert {"latency", "time to first token", "cost (USD)", "tokens (in + out)"} <= set(
        runs["filters"]
    )

    # The thread list: the Inspect column within the window, the title on a line or two.
    assert threads["rows"] == 3 and threads["pageWidth"] <= threads["viewport"]
    assert_shown(threads, {"title_display", "thread_id_display", "updated_at", "inspect_link"})
    title, *others = [cell for cell in threads["cells"] if cell["field"] == "title_display"]
    # The denied message titles nothing.
    assert [title["text"], *(cell["text"] for cell in others)] == [
        LONG_TITLE,
        "(untitled)",
        "Hello there",
    ]
    assert title["box"]["height"] <= 2.5 * title["lineHeight"] + 16, title

    # The inspector: the selected run's protocol and executor, each run's in the list, and
    # a search box as wide as its placeholder.
    assert (inspector["traceProtocol"], inspector["traceExecutor"]) == ("agui", "inline")
    assert inspector["runProtocols"] == ["agui", "agui"]
    assert inspector["runExecutors"] == ["inline", "inline"]
    placeholder = inspector["placeholder"]
    assert placeholder["text"] == "Search in this thread's messages"
    assert placeholder["textWidth"] <= placeholder["room"], placeholder
    assert inspector["pageWidth"] <= inspector["viewport"]
