"""Usage and cost totals of a thread, and the threads that cost the most (from the runs); the
usage page's figures per time, agent, model and user are ``usage_report``'s."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Max, Min, QuerySet, Sum

from conversations.models import Run, Thread

# Named apart from the fields they sum: Django refuses an annotation named like a field.
_SUMS = {
    "n_runs": Count("id"),
    "sum_input_tokens": Sum("input_tokens"),
    "sum_output_tokens": Sum("output_tokens"),
    "sum_cached_input_tokens": Sum("cached_input_tokens"),
    "sum_reasoning_tokens": Sum("reasoning_tokens"),
    "sum_cost": Sum("cost"),
}


@dataclass(frozen=True, slots=True)
class UsageRow:
    key: Any  # the day, agent, model or thread primary key
    label: str
    runs: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    reasoning_tokens: int
    cost: Decimal | None  # None: no run of the group was priced


@dataclass(frozen=True, slots=True)
class ThreadUsage:
    runs: int
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    reasoning_tokens: int
    cost: Decimal | None
    first_run_at: dt.datetime | None
    last_run_at: dt.datetime | None


def _row(key: Any, label: str, values: dict[str, Any]) -> UsageRow:
    return UsageRow(
        key=key,
        label=label,
        runs=values["n_runs"] or 0,
        input_tokens=values["sum_input_tokens"] or 0,
        output_tokens=values["sum_output_tokens"] or 0,
        cached_input_tokens=values["sum_cached_input_tokens"] or 0,
        reasoning_tokens=values["sum_reasoning_tokens"] or 0,
        cost=values["sum_cost"],
    )


def _runs_since(since: dt.datetime | None) -> QuerySet[Run]:
    runs = Run.objects.order_by()
    return runs.filter(created_at__gte=since) if since is not None else runs


def usage_of_thread(*, thread: Thread) -> ThreadUsage:
    values = (
        Run.objects.filter(thread=thread)
        .order_by()
        .aggregate(**_SUMS, first_run_at=Min("created_at"), last_run_at=Max("created_at"))
    )
    return ThreadUsage(
        runs=values["n_runs"] or 0,
        input_tokens=values["sum_input_tokens"] or 0,
        output_tokens=values["sum_output_tokens"] or 0,
        cached_input_tokens=values["sum_cached_input_tokens"] or 0,
        reasoning_tokens=values["sum_reasoning_tokens"] or 0,
        cost=values["sum_cost"],
        first_run_at=values["first_run_at"],
        last_run_at=values["last_run_at"],
    )


def usage_by_thread(*, since: dt.datetime | None = None, limit: int = 25) -> list[UsageRow]:
    """The threads that cost the most in the period (then the most output tokens)."""
    rows = (
        _runs_since(since)
        .values("thread_id", "thread__thread_id")
        .annotate(**_SUMS)
        .order_by(F("sum_cost").desc(nulls_last=True), "-sum_output_tokens", "thread_id")
    )[:limit]
    return [_row(row["thread_id"], row["thread__thread_id"], row) for row in rows]
