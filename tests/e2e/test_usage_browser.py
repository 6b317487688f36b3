"""The usage page and a model call's content in a real headless Chromium, 1280 px wide
(Debian's ``chromium`` driven by Playwright's library from ``tests/e2e/js/browser/usage.cjs``;
no browser is ever downloaded), with the data of real turns of the CopilotKit client.

The elements are checked, not pixels: the index links to the page; every chart fits the
window, has a slot per bucket of its period and its bars inside it; values read as money or
durations; the tables carry the runs' figures; a model call shows the whole prompt it was sent
and its attributes as rows. Screenshots go to ``$SCREENSHOT_DIR`` (scripts/test.sh sets it).
"""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.db.models import F
from django.urls import reverse

from conversations.models import Run, Span
from copilot_runtime.models import ModelPrice
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

PASSWORD = "usage-password-123"
WIDTH = 1280


def _drive(command: dict[str, Any]) -> dict[str, Any]:
    return run_browser_script("usage.cjs", command)


def _real_turn(server_url: str, fake_upstream: FakeUpstream, thread_id: str, *script: Any) -> Run:
    fake_upstream.script(*script)
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "What is 2 + 40?")])
    result = run_js(JS_CLIENT_VERSIONS[0], generate_command(server_url, data))
    run = finished_run(result["final"]["runId"])
    wait_for(lambda: Span.objects.filter(run=run, kind="run").exists(), what="the run's spans")
    return run


def test_the_usage_page_and_a_model_calls_content_in_a_real_browser(
    live_server_factory: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    get_user_model().objects.create_superuser(username="usage", password=PASSWORD)
    ModelPrice.objects.create(
        model="gpt-4o-mini", input_per_million=Decimal("0.15"), output_per_million=Decimal("0.6")
    )
    server = live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_TRACE_CONTENT="true")
    )
    tool_run = _real_turn(
        server.url,
        fake_upstream,
        "usage-tool",
        {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 2, "b": 40}}]},
        {"text": "The sum is 42."},
    )
    older = _real_turn(server.url, fake_upstream, "usage-text", {"text": "Forty-two."})
    # The text turn happened five days ago: the month shows it apart, with empty days between.
    shift = dt.timedelta(days=5)
    Run.objects.filter(pk=older.pk).update(
        created_at=F("created_at") - shift,
        started_at=F("started_at") - shift,
        first_token_at=F("first_token_at") - shift,
        finished_at=F("finished_at") - shift,
    )
    inspect = reverse("admin:conversations_thread_inspect", args=[tool_run.thread_id])
    screenshots = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path)

    browsed = _drive(
        {
            "baseUrl": server.url,
            "username": "usage",
            "password": PASSWORD,
            "screenshotDir": str(screenshots),
            "usagePeriods": ["30", "1", "365"],
            "inspectPath": f"{inspect}?{urlencode({'run': tool_run.pk})}",
        }
    )

    usage_url = reverse("admin:conversations_usagereport_changelist")
    assert browsed["indexLink"] == usage_url and usage_url in browsed["landed"]
    month, day, year = browsed["usage"]
    for page, slots in ((month, 31), (day, 25), (year, 366)):
        assert page["status"] == 200 and page["empty"] is None
        assert page["scrollWidth"] <= WIDTH  # nothing overflows the window
        assert len(page["charts"]) == 6
        for chart in page["charts"][:5]:  # the charts over time
            assert 0 < chart["width"] <= WIDTH
            assert all(b["left"] >= 0 and b["right"] <= chart["width"] + 0.5 for b in chart["bars"])
            assert all(b["width"] <= chart["width"] / slots for b in chart["bars"]), chart["title"]
            assert len([t for t in chart["ticks"] if t]) >= (1 if slots == 25 else 4)
    runs_chart = month["charts"][0]
    assert runs_chart["title"] == "Runs and errors per day"
    assert [b["title"].split(", ")[1] for b in runs_chart["bars"]] == ["runs: 1", "runs: 1"]
    # Five days apart on the axis: the bars sit five slots apart.
    left, right = sorted(b["left"] for b in runs_chart["bars"])
    slot = (runs_chart["width"] - 70 - 24) / 31
    assert (right - left) / slot == pytest.approx(5, abs=0.1)
    cost_chart = month["charts"][2]
    assert cost_chart["values"][0] == "$0" and all(
        v.startswith("$0.0000") for v in cost_chart["values"][1:]
    )
    assert all(b["title"].split(": ")[1].startswith("$0.0000") for b in cost_chart["bars"])
    assert month["total"]["total-runs"] == "2"
    model_rows = {row[0]: row for row in month["tables"]["usage-model"]}
    assert model_rows["gpt-4o-mini"][1] == "2"
    assert model_rows["gpt-4o-mini"][7].startswith("$0.0000")  # the cost column, to magnitude
    assert day["charts"][0]["title"] == "Runs and errors per hour"
    assert day["total"]["total-runs"] == "1"
    assert year["total"]["total-runs"] == "2"

    # The model call after the server action: the whole prompt it was sent, in order.
    call = browsed["call"]
    assert call["scrollWidth"] <= WIDTH
    sent = [
        (entry["source"], entry["role"]) for entry in call["prompt"] if entry["source"] != "system"
    ]
    assert sent == [
        ("history", "user"),
        ("run", "assistant"),
        ("run", "tool"),
        ("tools", sent[3][1]),
    ]
    assert call["prompt"][-4]["text"] == "What is 2 + 40?"
    assert call["prompt"][-3]["text"].startswith("calls serverAdd(")
    assert '"sum": 42' in call["prompt"][-2]["text"] and "serverAdd" in sent[3][1]
    assert ["gen_ai.request.model", "gpt-4o-mini"] in call["attributes"]
    assert "The sum is 42." in call["output"]
    for shot in [*(page["screenshot"] for page in browsed["usage"]), call["screenshot"]]:
        assert Path(shot).read_bytes().startswith(b"\x89PNG")
