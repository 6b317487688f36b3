"""List filters of the inspector's changelists: threads by their runs' error codes, runs by
ranges of latency, time to first token, cost and tokens."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest

from conversations.models import Run, Thread


class ThreadErrorCodeFilter(admin.SimpleListFilter):
    """Threads with at least one run that ended with this error code."""

    title = "run error code"
    parameter_name = "error_code"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        codes = (
            Run.objects.exclude(error_code="")
            .order_by("error_code")
            .values_list("error_code", flat=True)
            .distinct()
        )
        return [(code, code) for code in codes]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        code = self.value()
        if not code:
            return queryset
        runs = Run.objects.filter(thread=OuterRef("pk"), error_code=code)
        return queryset.filter(Exists(runs))


class RunUserFilter(admin.SimpleListFilter):
    """Runs on the threads of one user (or anonymous callers). The users offered are read from
    the threads, not from every run: the run table is the largest."""

    title = "user"
    parameter_name = "user"
    ANONYMOUS = "anonymous"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        owners = get_user_model().objects.filter(
            pk__in=Thread.objects.filter(owner__isnull=False).values("owner_id")
        )
        users = [(str(user.pk), user.get_username()) for user in owners.order_by("pk")[:100]]
        return [*users, (self.ANONYMOUS, "anonymous")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        chosen = self.value()
        if not chosen:
            return queryset
        if chosen == self.ANONYMOUS:
            return queryset.filter(thread__owner__isnull=True)
        if not chosen.isdigit():
            raise IncorrectLookupParameters("user: not a user's id")
        return queryset.filter(thread__owner_id=int(chosen))


# --- the run explorer's ranges ----------------------------------------------------------------


class RangeFilter(admin.ListFilter):
    """Runs whose value (an annotation of ``RunAdmin.get_queryset``) lies within a range given
    in the query string as ``<param>_min`` and/or ``<param>_max`` (inclusive), so a found set
    of runs is a link to share. ``presets`` are the ranges offered as links; the form under
    them takes any other."""

    template = "admin/conversations/range_filter.html"
    param = ""
    field = ""  # the annotation filtered on
    unit = ""
    presets: tuple[tuple[str, str, str], ...] = ()  # (label, min, max): "" is open
    form: dict[str, Any]

    def __init__(self, request: HttpRequest, params: dict[str, Any], model: Any, admin_: Any):
        super().__init__(request, params, model, admin_)
        for name in self.expected_parameters():
            if name in params:
                self.used_parameters[name] = str(params.pop(name)[-1]).strip()

    def expected_parameters(self) -> list[str]:
        return [f"{self.param}_min", f"{self.param}_max"]

    def has_output(self) -> bool:
        return True

    def bound(self, text: str) -> Any:
        """The query string's number as the annotation's value; ValueError when it is none."""
        number = Decimal(text)
        if not number.is_finite() or number < 0:
            raise ValueError(text)
        return number

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        low, high = (self.used_parameters.get(name, "") for name in self.expected_parameters())
        try:
            if low:
                queryset = queryset.filter(**{f"{self.field}__gte": self.bound(low)})
            if high:
                queryset = queryset.filter(**{f"{self.field}__lte": self.bound(high)})
        except (ValueError, ArithmeticError) as refused:
            # The admin answers this with its own "?e=1" page, not an error.
            raise IncorrectLookupParameters(f"{self.title}: not a number") from refused
        return queryset

    def choices(self, changelist: Any) -> Iterator[dict[str, Any]]:
        # The template is given the filter, not the changelist: it reads the form from here.
        self.form = self.form_context(changelist)
        names = self.expected_parameters()
        current = tuple(self.used_parameters.get(name, "") for name in names)
        yield {
            "selected": current == ("", ""),
            "query_string": changelist.get_query_string(remove=names),
            "display": "All",
        }
        for label, low, high in self.presets:
            values = {name: value for name, value in zip(names, (low, high), strict=True) if value}
            yield {
                "selected": current == (low, high),
                "query_string": changelist.get_query_string(values, remove=names),
                "display": label,
            }

    def form_context(self, changelist: Any) -> dict[str, Any]:
        """The form's fields: the range's two bounds and every other parameter as it is."""
        names = self.expected_parameters()
        kept = [
            (key, value)
            for key, values in changelist.filter_params.items()
            if key not in names
            for value in values
        ]
        return {
            "names": names,
            "values": [self.used_parameters.get(name, "") for name in names],
            "kept": kept,
            "unit": self.unit,
        }


class DurationRangeFilter(RangeFilter):
    """A range of milliseconds, on an annotation that is a duration."""

    unit = "ms"

    def bound(self, text: str) -> Any:
        return dt.timedelta(milliseconds=float(super().bound(text)))


class LatencyFilter(DurationRangeFilter):
    title = "latency"
    param = "latency_ms"
    field = "latency"
    presets = (
        ("under 1 s", "", "1000"),
        ("1 to 5 s", "1000", "5000"),
        ("5 to 30 s", "5000", "30000"),
        ("over 30 s", "30000", ""),
    )


class FirstTokenFilter(DurationRangeFilter):
    title = "time to first token"
    param = "ttft_ms"
    field = "first_token"
    presets = (
        ("under 500 ms", "", "500"),
        ("500 ms to 2 s", "500", "2000"),
        ("over 2 s", "2000", ""),
    )


class CostFilter(RangeFilter):
    title = "cost (USD)"
    param = "cost"
    field = "cost"
    unit = "$"
    presets = (
        ("under $0.001", "", "0.001"),
        ("$0.001 to $0.01", "0.001", "0.01"),
        ("$0.01 to $0.10", "0.01", "0.1"),
        ("over $0.10", "0.1", ""),
    )


class TokensFilter(RangeFilter):
    title = "tokens (in + out)"
    param = "tokens"
    field = "tokens"
    unit = "tokens"
    presets = (
        ("under 1,000", "", "1000"),
        ("1,000 to 10,000", "1000", "10000"),
        ("over 10,000", "10000", ""),
    )
