"""Usage and cost totals: per thread, per agent, per model and per day (from the runs)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Avg, Count, F, Max, Min, QuerySet, Sum
from django.db.models.functions import TruncDate

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


def usage_by_day(*, since: dt.datetime | None = None) -> list[UsageRow]:
    rows = (
        _runs_since(since)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(**_SUMS)
        .order_by("-day")
    )
    return [_row(row["day"], row["day"].isoformat(), row) for row in rows]


def usage_by_agent(*, since: dt.datetime | None = None) -> list[UsageRow]:
    rows = _runs_since(since).values("agent_name").annotate(**_SUMS).order_by("agent_name")
    return [_row(row["agent_name"], row["agent_name"], row) for row in rows]


def usage_by_model(*, since: dt.datetime | None = None) -> list[UsageRow]:
    rows = _runs_since(since).values("model").annotate(**_SUMS).order_by("model")
    return [_row(row["model"], row["model"] or "(none)", row) for row in rows]


def usage_by_thread(*, since: dt.datetime | None = None, limit: int = 25) -> list[UsageRow]:
    """The threads that cost the most in the period (then the most output tokens)."""
    rows = (
        _runs_since(since)
        .values("thread_id", "thread__thread_id")
        .annotate(**_SUMS)
        .order_by(F("sum_cost").desc(nulls_last=True), "-sum_output_tokens", "thread_id")
    )[:limit]
    return [_row(row["thread_id"], row["thread__thread_id"], row) for row in rows]


def ttft_by_day(*, since: dt.datetime | None = None) -> list[tuple[dt.date, float]]:
    """The mean time to first token per day, in milliseconds, oldest first (runs that
    streamed something)."""
    rows = (
        _runs_since(since)
        .filter(first_token_at__isnull=False)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(ttft=Avg(F("first_token_at") - F("created_at")))
        .order_by("day")
    )
    return [
        (row["day"], row["ttft"].total_seconds() * 1000) for row in rows if row["ttft"] is not None
    ]
