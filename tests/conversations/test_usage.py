"""Usage and cost totals per thread, agent, model and day, and the admin's report page."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from conversations.admin.usage import (
    usage_by_agent,
    usage_by_day,
    usage_by_model,
    usage_by_thread,
    usage_of_thread,
)
from conversations.models import Run, Thread

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(hour=12, minute=0, second=0, microsecond=0)


def _run(
    thread: Thread,
    run_id: str,
    *,
    days_ago: int,
    agent: str = "default",
    model: str = "m1",
    tokens: tuple[int, int] = (100, 10),
    cost: str | None = "0.01",
) -> Run:
    run = Run.objects.create(
        id=run_id,
        thread=thread,
        agent_name=agent,
        model=model,
        status="succeeded",
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        cached_input_tokens=tokens[0] // 10,
        reasoning_tokens=tokens[1] // 2,
        cost=Decimal(cost) if cost is not None else None,
    )
    Run.objects.filter(pk=run_id).update(created_at=NOW - dt.timedelta(days=days_ago))
    return run


@pytest.fixture
def threads() -> dict[str, Thread]:
    a = Thread.objects.create(thread_id="thread-a")
    b = Thread.objects.create(thread_id="thread-b", agent_name="travel")
    c = Thread.objects.create(thread_id="thread-c")
    _run(a, "a1", days_ago=0, cost="0.50")
    _run(a, "a2", days_ago=1, cost="0.25", tokens=(300, 30))
    _run(b, "b1", days_ago=0, agent="travel", model="m2", cost="2.00")
    _run(b, "b2", days_ago=40, agent="travel", model="m2", cost="9.00")
    _run(c, "c1", days_ago=1, cost=None, tokens=(1000, 1000))
    return {"a": a, "b": b, "c": c}


def test_usage_of_a_thread(threads: dict[str, Thread]) -> None:
    usage = usage_of_thread(thread=threads["a"])

    assert (usage.runs, usage.input_tokens, usage.output_tokens) == (2, 400, 40)
    assert (usage.cached_input_tokens, usage.reasoning_tokens) == (40, 20)
    assert usage.cost == Decimal("0.75")
    assert usage.first_run_at < usage.last_run_at


def test_an_unpriced_thread_has_no_cost(threads: dict[str, Thread]) -> None:
    assert usage_of_thread(thread=threads["c"]).cost is None
    assert usage_of_thread(thread=Thread.objects.create(thread_id="empty")).runs == 0


def test_usage_per_day_in_a_period(threads: dict[str, Thread]) -> None:
    rows = usage_by_day(since=NOW - dt.timedelta(days=7))

    assert [(r.label, r.runs, r.cost) for r in rows] == [
        (NOW.date().isoformat(), 2, Decimal("2.50")),
        ((NOW - dt.timedelta(days=1)).date().isoformat(), 2, Decimal("0.25")),
    ]


def test_usage_per_agent_and_model(threads: dict[str, Thread]) -> None:
    assert [(r.label, r.runs, r.input_tokens, r.cost) for r in usage_by_agent()] == [
        ("default", 3, 1400, Decimal("0.75")),
        ("travel", 2, 200, Decimal("11.00")),
    ]
    recent = usage_by_model(since=NOW - dt.timedelta(days=7))
    assert [(r.label, r.runs) for r in recent] == [("m1", 3), ("m2", 1)]


def test_the_threads_that_cost_the_most_come_first(threads: dict[str, Thread]) -> None:
    rows = usage_by_thread(since=NOW - dt.timedelta(days=7))

    assert [(r.label, r.cost) for r in rows] == [
        ("thread-b", Decimal("2.00")),
        ("thread-a", Decimal("0.75")),
        ("thread-c", None),
    ]
    assert rows[0].key == threads["b"].pk
    assert [r.label for r in usage_by_thread(limit=1)] == ["thread-b"]


def test_the_usage_report_page(admin_client: Client, threads: dict[str, Thread]) -> None:
    response = admin_client.get(reverse("admin:conversations_run_usage"), {"days": "7"})

    page = response.content.decode()
    assert response.status_code == 200
    assert "Per day" in page and "Per agent" in page and "Threads that cost the most" in page
    assert "2.500000" in page and "0.750000" in page
    assert "9.000000" not in page  # outside the period
    inspect = reverse("admin:conversations_thread_inspect", args=[threads["b"].pk])
    assert f'href="{inspect}"' in page


def test_the_usage_report_over_all_time(admin_client: Client, threads: dict[str, Thread]) -> None:
    page = admin_client.get(reverse("admin:conversations_run_usage"), {"days": "all"})

    assert "11.000000" in page.content.decode()


def test_the_run_list_links_to_the_report(admin_client: Client) -> None:
    page = admin_client.get(reverse("admin:conversations_run_changelist")).content.decode()

    assert reverse("admin:conversations_run_usage") in page


def test_the_report_needs_the_run_permission(
    threads: dict[str, Thread], django_user_model: Any
) -> None:
    staff = django_user_model.objects.create_user(username="s", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)

    assert client.get(reverse("admin:conversations_run_usage")).status_code == 403


# --- the charts -----------------------------------------------------------------------------------


def test_the_report_draws_its_charts_on_the_server(
    admin_client: Client, threads: dict[str, Thread]
) -> None:
    Run.objects.filter(pk="a1").update(first_token_at=NOW + dt.timedelta(milliseconds=250))
    Run.objects.filter(pk="a2").update(
        first_token_at=NOW - dt.timedelta(days=1) + dt.timedelta(milliseconds=750)
    )
    page = admin_client.get(reverse("admin:conversations_run_usage")).content.decode()

    assert page.count('<figure class="ins-chart">') == 5
    for title in (
        "Tokens per day",
        "Cost per day (USD)",
        "Tokens per model",
        "Cost per model (USD)",
        "Time to first token, mean per day (ms)",
    ):
        assert f"<figcaption>{title}</figcaption>" in page
    # Per day over 30 days: today and yesterday (the 40-day-old run is outside the period).
    assert page.count('fill="#417690"><title>') >= 2 + 2 + 2 + 2
    assert "250 ms" in page and "750 ms" in page  # one TTFT point per day, oldest first
    assert page.index("750 ms") < page.index("250 ms")
    # m2 (2.00 USD) is the largest cost bar, drawn first.
    cost_chart = page[page.index("Cost per model (USD)") :]
    assert cost_chart.index(">m2<") < cost_chart.index(">m1<")


def test_chart_labels_are_escaped(admin_client: Client) -> None:
    thread = Thread.objects.create(thread_id="thread-x")
    _run(thread, "x1", days_ago=0, model="<script>alert(1)</script>")
    page = admin_client.get(reverse("admin:conversations_run_usage")).content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_period_without_runs_says_so_instead_of_drawing(admin_client: Client) -> None:
    page = admin_client.get(reverse("admin:conversations_run_usage")).content.decode()
    charts = page[page.index('<div class="ins-charts">') :]
    charts = charts[: charts.index("</div>")]
    assert charts.count("No runs in this period.") == 5
    assert "<rect" not in charts
