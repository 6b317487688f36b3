"""The usage page: its figures over a day, a month and a year (every bucket shown, empty ones
too), percentiles as PostgreSQL and the Python fallback compute them, costs to their
magnitude, its charts, its empty state, and its place on the admin index."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations.admin import usage_report as report_module
from conversations.admin.charts import Series, axis_ticks, round_top, time_chart
from conversations.admin.rendering import money
from conversations.admin.usage_report import percentile, usage_report
from conversations.models import Run, Thread

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)


def _run(
    thread: Thread,
    run_id: str,
    *,
    ago: dt.timedelta,
    agent: str = "default",
    model: str = "m1",
    status: str = "succeeded",
    tokens: tuple[int, int] = (100, 10),
    cost: str | None = "0.000036",
    ttft_ms: int | None = 200,
    duration_ms: int | None = 1000,
) -> Run:
    created = NOW - ago
    Run.objects.create(
        id=run_id,
        thread=thread,
        agent_name=agent,
        model=model,
        status=status,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cost=Decimal(cost) if cost is not None else None,
    )
    Run.objects.filter(pk=run_id).update(
        created_at=created,
        started_at=created,
        first_token_at=created + dt.timedelta(milliseconds=ttft_ms) if ttft_ms else None,
        finished_at=created + dt.timedelta(milliseconds=duration_ms) if duration_ms else None,
    )
    return Run.objects.get(pk=run_id)


@pytest.fixture
def month(user: Any) -> Thread:
    """Runs on three days of the last thirty, and one long before."""
    owned = Thread.objects.create(thread_id="owned", owner=user)
    anonymous = Thread.objects.create(thread_id="anonymous")
    for index, ttft in enumerate((100, 200, 300, 400, 1000)):
        _run(owned, f"today-{index}", ago=dt.timedelta(hours=index), ttft_ms=ttft)
    _run(owned, "failed", ago=dt.timedelta(days=3), status="failed", cost="2.5", model="m2")
    _run(anonymous, "demo", ago=dt.timedelta(days=10), model="demo", cost=None, agent="travel")
    _run(anonymous, "old", ago=dt.timedelta(days=200), cost="9")
    return owned


def test_a_month_has_a_bucket_per_day_and_its_figures(month: Thread) -> None:
    report = usage_report(period="30", now=NOW)

    assert (report.step, len(report.buckets)) == ("day", 31)
    busy = {b.label: b for b in report.buckets if b.runs}
    today = NOW.date().isoformat()
    days_ago = [(NOW - dt.timedelta(days=n)).date().isoformat() for n in (0, 3, 10)]
    assert sorted(busy) == sorted(days_ago)
    assert sum(b.runs for b in report.buckets) == report.total.runs == 7
    assert (report.total.errors, report.total.unpriced_runs) == (1, 1)
    assert report.total.cost == Decimal("2.5") + 5 * Decimal("0.000036")
    # p50 and p95 of 100, 200, 300, 400 and 1000 ms, interpolated as percentile_cont does.
    assert (busy[today].ttft_p50, busy[today].ttft_p95) == (300.0, pytest.approx(880.0))
    assert busy[today].run_p50 == 1000.0
    by_model = {f.label: f for f in report.groups["model"]}
    assert by_model["m2"].error_rate == 1.0 and by_model["m2"].cost_text == "$2.50"
    assert by_model["m1"].cost_text == "$0.00018"
    assert (by_model["demo"].cost_text, by_model["demo"].unpriced_runs) == ("$0", 1)
    by_user = {f.label: f.runs for f in report.groups["user"]}
    assert by_user == {"alice": 6, "(anonymous)": 1}
    assert [f.label for f in report.groups["agent"]] == ["default", "travel"]


def test_the_python_percentiles_agree_with_postgresql(
    month: Thread, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_sql = usage_report(period="30", now=NOW)
    monkeypatch.setattr(report_module.connection, "vendor", "sqlite")
    in_python = usage_report(period="30", now=NOW)

    def latencies(report: Any) -> dict[str, list[float | None]]:
        rows = [*report.buckets, report.total, *report.groups["model"]]
        return {f.label: [f.ttft_p50, f.ttft_p95, f.run_p50, f.run_p95] for f in rows}

    expected = latencies(in_sql)
    assert set(latencies(in_python)) == set(expected)
    for label, values in latencies(in_python).items():
        assert values == pytest.approx(expected[label]), label
    assert percentile([], 0.5) is None and percentile([7.0], 0.95) == 7.0


def test_a_day_is_drawn_per_hour_and_a_year_per_day_and_all_time_per_week(month: Thread) -> None:
    day = usage_report(period="1", now=NOW)
    year = usage_report(period="365", now=NOW)
    Run.objects.filter(pk="old").update(created_at=NOW - dt.timedelta(days=800))
    all_time = usage_report(period="all", now=NOW)

    assert (day.step, len(day.buckets), day.total.runs) == ("hour", 25, 5)
    assert [b.label for b in day.buckets if b.runs] == [f"{h:02d}:00" for h in range(8, 13)]
    assert (year.step, len(year.buckets), year.total.runs) == ("day", 366, 8)
    assert all_time.step == "week" and all_time.total.runs == 8
    assert 114 <= len(all_time.buckets) <= 116
    assert all(b.key.weekday() == 0 for b in all_time.buckets)


def test_costs_read_to_their_magnitude() -> None:
    assert [money(v) for v in (None, 0, "0.000036", "0.00036", "0.25", "12.5", "1234.5")] == [
        "$0",
        "$0",
        "$0.000036",
        "$0.00036",
        "$0.25",
        "$12.50",
        "$1,234.50",
    ]


def test_a_time_chart_has_a_slot_per_bucket_and_a_readable_axis() -> None:
    labels = [f"day {i}" for i in range(30)]
    values: list[float | None] = [0.0] * 30
    values[29] = 0.000036
    chart = str(
        time_chart(
            "Cost",
            labels=labels,
            ticks=axis_ticks(labels),
            series=[Series("cost", "#000", values)],
            value_text=money,
        )
    )

    bars = re.findall(r'<rect class="chart-bar" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', chart)
    assert len(bars) == 1 and float(bars[0]) < 760 / 30  # one bar in one slot of thirty
    assert re.findall(r'class="chart-value"[^>]*>([^<]*)<', chart) == [
        "$0",
        "$0.000025",
        "$0.00005",
    ]
    assert "day 29, cost: $0.000036" in chart
    assert round_top(7) == 10 and round_top(0.000036) == pytest.approx(0.00005)
    nothing = [Series("c", "#000", [0.0] * 30)]
    empty = str(time_chart("Cost", labels=labels, ticks=labels, series=nothing, value_text=money))
    assert "Nothing yet" in empty and "<rect" not in empty and "max" not in empty


# --- the page -------------------------------------------------------------------------------------


def _page(client: Client, **params: str) -> str:
    response = client.get(reverse("admin:conversations_usagereport_changelist"), params)
    assert response.status_code == 200
    return response.content.decode()


def test_the_admin_index_links_to_the_page(admin_client: Client) -> None:
    index = admin_client.get(reverse("admin:index")).content.decode()

    assert f'href="{reverse("admin:conversations_usagereport_changelist")}"' in index
    assert "Usage and cost" in index


def test_the_page_shows_the_periods_figures_and_charts(admin_client: Client, month: Thread) -> None:
    page = _page(admin_client, days="30")

    assert re.search(r'<td id="total-runs">7</td>', page)
    assert '<td id="total-error-rate">14.3%</td>' in page
    assert page.count('<figure class="ins-chart">') == 6
    for section in ("usage-time", "usage-agent", "usage-model", "usage-user", "usage-thread"):
        assert f'id="{section}"' in page
    assert "$0.00018" in page and "$2.50" in page and "(1 unpriced)" in page
    assert "$9" not in page  # outside the period
    assert "300 ms / 880 ms" in page  # today's first-token p50 / p95
    assert f'href="{reverse("admin:conversations_thread_inspect", args=[month.pk])}"' in page


def test_an_empty_period_says_there_is_nothing_yet(admin_client: Client) -> None:
    page = _page(admin_client, days="7")

    assert "Nothing yet: no runs in the last 7 days." in page
    assert '<figure class="ins-chart">' not in page and 'id="usage-total"' not in page


def test_the_page_needs_the_run_permission_and_its_old_address_redirects(
    admin_client: Client,
) -> None:
    staff = get_user_model().objects.create_user(username="s", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    url = reverse("admin:conversations_usagereport_changelist")

    assert client.get(url).status_code == 403
    old = admin_client.get(reverse("admin:conversations_run_usage"), {"days": "7"})
    assert (old.status_code, old["Location"]) == (302, f"{url}?days=7")
    assert (
        "Usage and cost"
        in admin_client.get(reverse("admin:conversations_run_changelist")).content.decode()
    )
