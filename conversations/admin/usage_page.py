"""The admin's usage page, listed on the admin index (``UsageReport``, a proxy of ``Run``):
the figures of ``usage_report`` as charts and tables, costs to their magnitude."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.safestring import SafeString

from conversations.admin.charts import (
    Point,
    Series,
    axis_ticks,
    bar_chart,
    count_text,
    ms_text,
    time_chart,
)
from conversations.admin.rendering import money
from conversations.admin.usage import usage_by_thread
from conversations.admin.usage_report import PERIODS, Figures, UsageReport, usage_report
from conversations.models import Run
from conversations.models import UsageReport as UsageReportModel

USAGE_TEMPLATE = "admin/conversations/run/usage.html"
PERIOD_NAMES = {
    "1": "last day",
    "7": "last 7 days",
    "30": "last 30 days",
    "90": "last 90 days",
    "365": "last year",
    "all": "all time",
}
_BLUE, _LIGHT, _RED = "#417690", "#9cc3d6", "#ba2121"


def _tick(report: UsageReport, figures: Figures) -> str:
    return figures.key.strftime("%H:00" if report.step == "hour" else "%b %d")


def usage_charts(report: UsageReport) -> list[SafeString]:
    """Runs and errors, tokens, cost, time to first token and run duration per bucket, and
    cost per model."""
    buckets = report.buckets
    labels = [b.label for b in buckets]
    ticks = axis_ticks([_tick(report, b) for b in buckets])
    per = f"per {report.step}"

    def chart(
        title: str, series: list[Series], value_text: Any, *, counts: bool = False
    ) -> SafeString:
        return time_chart(
            f"{title} {per}",
            labels=labels,
            ticks=ticks,
            series=series,
            value_text=value_text,
            counts=counts,
        )

    return [
        chart(
            "Runs and errors",
            [
                Series("runs", _BLUE, [b.runs for b in buckets]),
                Series("errors", _RED, [b.errors for b in buckets]),
            ],
            count_text,
            counts=True,
        ),
        chart(
            "Tokens",
            [
                Series("input", _BLUE, [b.input_tokens for b in buckets]),
                Series("output", _LIGHT, [b.output_tokens for b in buckets]),
            ],
            count_text,
            counts=True,
        ),
        chart("Cost (USD)", [Series("cost", _BLUE, [float(b.cost) for b in buckets])], money),
        chart(
            "Time to first token",
            [
                Series("p50", _BLUE, [b.ttft_p50 for b in buckets]),
                Series("p95", _LIGHT, [b.ttft_p95 for b in buckets]),
            ],
            ms_text,
        ),
        chart(
            "Run duration",
            [
                Series("p50", _BLUE, [b.run_p50 for b in buckets]),
                Series("p95", _LIGHT, [b.run_p95 for b in buckets]),
            ],
            ms_text,
        ),
        bar_chart(
            "Cost per model (USD)",
            [Point(f.label, float(f.cost)) for f in report.groups["model"]],
            value_text=money,
        ),
    ]


def vars_of(row: Any) -> dict[str, Any]:
    return {name: getattr(row, name) for name in row.__slots__}


def usage_context(*, period: str | None) -> dict[str, Any]:
    report = usage_report(period=period, now=timezone.now())
    return {
        "title": "Usage and cost",
        "report": report,
        "period": report.period,
        "periods": [(key, PERIOD_NAMES[key]) for key in PERIODS],
        "period_name": PERIOD_NAMES[report.period],
        "charts": [] if report.empty else usage_charts(report),
        "busy_buckets": [b for b in reversed(report.buckets) if b.runs],
        "by_thread": [
            {**vars_of(row), "cost": money(row.cost)}
            for row in (usage_by_thread(since=report.since) if not report.empty else [])
        ],
    }


@admin.register(UsageReportModel)
class UsageReportAdmin(admin.ModelAdmin):
    """The usage page as an entry of the admin index; readable by whoever may view runs."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(f"{Run._meta.app_label}.view_run") or request.user.has_perm(
            f"{Run._meta.app_label}.change_run"
        )

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            **usage_context(period=request.GET.get("days")),
        }
        return TemplateResponse(request, USAGE_TEMPLATE, context)
