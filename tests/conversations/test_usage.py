"""Usage and cost totals of a thread, and the threads that cost the most (the usage page is
test_usage_page.py's)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from conversations.admin.usage import usage_by_thread, usage_of_thread
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


def test_the_threads_that_cost_the_most_come_first(threads: dict[str, Thread]) -> None:
    rows = usage_by_thread(since=NOW - dt.timedelta(days=7))

    assert [(r.label, r.cost) for r in rows] == [
        ("thread-b", Decimal("2.00")),
        ("thread-a", Decimal("0.75")),
        ("thread-c", None),
    ]
    assert rows[0].key == threads["b"].pk
    assert [r.label for r in usage_by_thread(limit=1)] == ["thread-b"]
