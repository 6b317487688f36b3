"""The usage page's figures: per time bucket (every bucket of the period, empty ones too), per
agent, per model and per user: runs, error rate, tokens, cost, and the p50/p95 of the time to
first token and of the whole run.

Bounded as the tables grow: each grouping is one aggregate query over the period's runs, found
through the ``run_created`` index (a range of ``created_at``), so a period reads its own runs,
not the table. Percentiles are PostgreSQL's ``percentile_cont`` in the same query; SQLite has
none, so there the period's durations are read and the same interpolation is done in Python.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import (
    Aggregate,
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    Q,
    QuerySet,
    Sum,
)
from django.db.models.functions import Trunc

from conversations.admin.rendering import duration_text, money
from conversations.models import Run, RunStatus

# The choices of period, in days (None: all time).
PERIODS: dict[str, int | None] = {"1": 1, "7": 7, "30": 30, "90": 90, "365": 365, "all": None}
DEFAULT_PERIOD = "30"
# All time is drawn per week past this many days (a bar per day would be thinner than a pixel).
MOST_DAYS_DRAWN = 400
_STEPS = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1), "week": dt.timedelta(7)}
# The groupings besides time: the field each groups by.
GROUPINGS = {"agent": "agent_name", "model": "model", "user": "thread__owner__username"}

_TTFT = ExpressionWrapper(F("first_token_at") - F("started_at"), output_field=DurationField())
_DURATION = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
_SUMS = {
    "n_runs": Count("id"),
    "n_errors": Count("id", filter=Q(status=RunStatus.FAILED)),
    "sum_input": Sum("input_tokens"),
    "sum_output": Sum("output_tokens"),
    "sum_cached": Sum("cached_input_tokens"),
    "sum_reasoning": Sum("reasoning_tokens"),
    "sum_cost": Sum("cost"),
    "n_priced": Count("cost"),
}


class Percentile(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)``."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression: Any, *, fraction: float) -> None:
        super().__init__(expression, fraction=float(fraction), output_field=DurationField())


_PERCENTILES = {
    "ttft_p50": Percentile(_TTFT, fraction=0.5),
    "ttft_p95": Percentile(_TTFT, fraction=0.95),
    "run_p50": Percentile(_DURATION, fraction=0.5),
    "run_p95": Percentile(_DURATION, fraction=0.95),
}


@dataclass(slots=True)
class Figures:
    key: Any
    label: str
    runs: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cost: Decimal = Decimal(0)
    priced_runs: int = 0
    ttft_p50: float | None = None  # milliseconds
    ttft_p95: float | None = None
    run_p50: float | None = None
    run_p95: float | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def error_rate(self) -> float | None:
        return self.errors / self.runs if self.runs else None

    @property
    def unpriced_runs(self) -> int:
        return self.runs - self.priced_runs

    # Text for the page, each figure to its magnitude.
    @property
    def cost_text(self) -> str:
        return money(self.cost)

    @property
    def error_rate_text(self) -> str:
        rate = self.error_rate
        return "—" if rate is None else f"{rate * 100:.1f}%".replace(".0%", "%")

    @property
    def ttft_text(self) -> str:
        return _latency(self.ttft_p50, self.ttft_p95)

    @property
    def run_text(self) -> str:
        return _latency(self.run_p50, self.run_p95)


def _latency(p50: float | None, p95: float | None) -> str:
    if p50 is None or p95 is None:
        return "—"
    return f"{duration_text(p50)} / {duration_text(p95)}"


@dataclass(frozen=True, slots=True)
class UsageReport:
    period: str
    since: dt.datetime | None
    step: str  # "hour", "day" or "week": one bucket of ``buckets``
    buckets: list[Figures]  # oldest first, every bucket of the period
    total: Figures
    groups: dict[str, list[Figures]]  # by GROUPINGS' name, most runs first

    @property
    def empty(self) -> bool:
        return self.total.runs == 0


def percentile(values: list[float], fraction: float) -> float | None:
    """``percentile_cont``'s linear interpolation, for a sorted list."""
    if not values:
        return None
    position = fraction * (len(values) - 1)
    low, high = math.floor(position), math.ceil(position)
    return values[low] + (values[high] - values[low]) * (position - low)


def _ms(value: dt.timedelta | None) -> float | None:
    return None if value is None else value.total_seconds() * 1000


def _figures(key: Any, label: str, row: dict[str, Any]) -> Figures:
    return Figures(
        key=key,
        label=label,
        runs=row["n_runs"] or 0,
        errors=row["n_errors"] or 0,
        input_tokens=row["sum_input"] or 0,
        output_tokens=row["sum_output"] or 0,
        cached_input_tokens=row["sum_cached"] or 0,
        reasoning_tokens=row["sum_reasoning"] or 0,
        cost=row["sum_cost"] or Decimal(0),
        priced_runs=row["n_priced"] or 0,
        ttft_p50=_ms(row.get("ttft_p50")),
        ttft_p95=_ms(row.get("ttft_p95")),
        run_p50=_ms(row.get("run_p50")),
        run_p95=_ms(row.get("run_p95")),
    )


def _python_percentiles(runs: QuerySet[Run], key: str | None) -> dict[Any, dict[str, Any]]:
    """Percentiles where the database has no ``percentile_cont``: from the period's times."""
    fields = ["started_at", "first_token_at", "finished_at"]
    rows = runs.filter(started_at__isnull=False).values_list(*([key] if key else []), *fields)
    ttfts: dict[Any, list[float]] = defaultdict(list)
    durations: dict[Any, list[float]] = defaultdict(list)
    for row in rows:
        group, (started, first_token, finished) = (row[0], row[1:]) if key else (None, row)
        if first_token is not None:
            ttfts[group].append((first_token - started).total_seconds() * 1000)
        if finished is not None:
            durations[group].append((finished - started).total_seconds() * 1000)
    result: dict[Any, dict[str, Any]] = {}
    for group in set(ttfts) | set(durations):
        first, whole = sorted(ttfts[group]), sorted(durations[group])
        result[group] = {
            "ttft_p50": percentile(first, 0.5),
            "ttft_p95": percentile(first, 0.95),
            "run_p50": percentile(whole, 0.5),
            "run_p95": percentile(whole, 0.95),
        }
    return result


def _grouped(runs: QuerySet[Run], key: str | None) -> dict[Any, Figures]:
    """The figures of ``runs`` per value of ``key`` (None: one group of them all)."""
    in_sql = connection.vendor == "postgresql"
    aggregates = {**_SUMS, **(_PERCENTILES if in_sql else {})}
    if key is None:
        rows = [{"key": None, **runs.aggregate(**aggregates)}]
    else:
        rows = [{"key": row[key], **row} for row in runs.values(key).annotate(**aggregates)]
    python = {} if in_sql else _python_percentiles(runs, key)
    figures = {}
    for row in rows:
        if not in_sql:
            ms = python.get(row["key"], {})
            row.update({name: None for name in _PERCENTILES})
            row.update(
                {name: dt.timedelta(milliseconds=v) for name, v in ms.items() if v is not None}
            )
        figures[row["key"]] = _figures(row["key"], str(row["key"] or ""), row)
    return figures


def _step(period_days: int | None, since: dt.datetime | None, now: dt.datetime) -> str:
    if period_days == 1:
        return "hour"
    if since is not None and (now - since).days > MOST_DAYS_DRAWN:
        return "week"
    return "day"


def _bucket_start(moment: dt.datetime, step: str) -> dt.datetime:
    moment = moment.astimezone(dt.UTC)
    if step == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    return day - dt.timedelta(days=day.weekday()) if step == "week" else day


def _bucket_label(start: dt.datetime, step: str) -> str:
    if step == "hour":
        return start.strftime("%H:00")
    return start.strftime("%Y-%m-%d")


def _buckets(
    found: dict[Any, Figures], *, since: dt.datetime, now: dt.datetime, step: str
) -> list[Figures]:
    """Every bucket from ``since`` to ``now``, with the runs found in it or none."""
    by_start = {_bucket_start(key, step): figures for key, figures in found.items() if key}
    buckets = []
    start, last = _bucket_start(since, step), _bucket_start(now, step)
    while start <= last:
        label = _bucket_label(start, step)
        figures = by_start.get(start) or Figures(key=start, label=label)
        figures.key, figures.label = start, label
        buckets.append(figures)
        start += _STEPS[step]
    return buckets


def usage_report(*, period: str | None, now: dt.datetime) -> UsageReport:
    """The page's figures for ``period`` (a key of ``PERIODS``; anything else: the default)."""
    period = period if period in PERIODS else DEFAULT_PERIOD
    days = PERIODS[period]
    runs = Run.objects.order_by()
    since = now - dt.timedelta(days=days) if days is not None else None
    if since is not None:
        runs = runs.filter(created_at__gte=since)
    else:
        first = runs.order_by("created_at").values_list("created_at", flat=True).first()
        since = first or now - dt.timedelta(days=int(DEFAULT_PERIOD))
    step = _step(days, since, now)
    bucketed = runs.annotate(bucket=Trunc("created_at", step, output_field=DateTimeField()))
    groups = {}
    for name, field in GROUPINGS.items():
        found = sorted(_grouped(runs, field).values(), key=lambda f: (-f.runs, f.label))
        for figures in found:
            figures.label = figures.label or ("(anonymous)" if name == "user" else "(none)")
        groups[name] = found
    total = _grouped(runs, None)[None]
    total.label = "All runs"
    return UsageReport(
        period=period,
        since=since,
        step=step,
        buckets=_buckets(_grouped(bucketed, "bucket"), since=since, now=now, step=step),
        total=total,
        groups=groups,
    )
