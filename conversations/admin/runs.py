"""Runs in the admin: the run explorer (filters and sorting on what a run cost and how long it
took), stopping runs, the usage report."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import DurationField, ExpressionWrapper, F, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_POST

from conversations.admin.filters import (
    CostFilter,
    FirstTokenFilter,
    LatencyFilter,
    RunUserFilter,
    TokensFilter,
)
from conversations.admin.inspector import ACTIVE_RUN_STATUSES
from conversations.admin.operations import run_stop
from conversations.admin.rendering import cost_text, duration_text
from conversations.models import Run


def run_inspect_url(run: Run) -> str:
    """The run's thread in the inspector, with this run's waterfall shown."""
    url = reverse("admin:conversations_thread_inspect", args=[run.thread_id])
    return f"{url}?{urlencode({'run': run.pk})}#waterfall"


def _interval(end: str, start: str) -> ExpressionWrapper:
    return ExpressionWrapper(F(end) - F(start), output_field=DurationField())


def _ms(value: dt.timedelta | None) -> float | None:
    return None if value is None else value.total_seconds() * 1000


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    """The run explorer. Runs are records: nothing here adds or changes one; stopping a run
    is an operation with its own permission (``stop_run``)."""

    # What fits at 1280 px beside the filters; the rest is on the run's page, one click away.
    list_display = (
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
    )
    list_display_links = ("id_display",)
    list_filter = (
        "status",
        "agent_name",
        "error_code",
        "protocol",
        "executor",
        "model",
        RunUserFilter,
        LatencyFilter,
        FirstTokenFilter,
        CostFilter,
        TokensFilter,
        "created_at",
    )
    search_fields = ("id", "thread__thread_id", "error_code", "thread__owner__username")
    date_hierarchy = "created_at"
    actions = ["stop_runs"]
    fieldsets = (
        (
            None,
            {
                "fields": (
                    "id",
                    "thread",
                    "user",
                    "agent_name",
                    "protocol",
                    "executor",
                    "request_type",
                    "previous_run_id",
                    "status",
                    "error_code",
                    "error_details",
                    "limits_tripped",
                    "cancel_requested",
                    "attempts",
                )
            },
        ),
        (
            "Usage",
            {
                "fields": (
                    "model",
                    "input_tokens",
                    "output_tokens",
                    "cached_input_tokens",
                    "reasoning_tokens",
                    "cost",
                )
            },
        ),
        (
            "Timing",
            {
                "fields": (
                    "created_at",
                    "started_at",
                    "first_token_at",
                    "finished_at",
                    "heartbeat_at",
                    "latency_display",
                    "first_token_display",
                )
            },
        ),
    )
    change_form_template = "admin/conversations/run/change_form.html"
    change_list_template = "admin/conversations/run/change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        # The stored request can be large; no page of the run admin shows it.
        return (
            super()
            .get_queryset(request)
            .defer("request_payload")
            .annotate(
                latency=_interval("finished_at", "started_at"),
                first_token=_interval("first_token_at", "started_at"),
                tokens=F("input_tokens") + F("output_tokens"),
            )
        )

    # --- a record: viewed, never added or changed --------------------------------------------

    def get_readonly_fields(self, request: HttpRequest, obj: Run | None = None) -> list[str]:
        return [name for _, options in self.fieldsets for name in options["fields"]]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        return False  # a run goes with its thread

    def has_stop_run_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.stop_run")

    # --- the columns -------------------------------------------------------------------------

    @admin.display(description="Created", ordering="created_at")
    def created_display(self, run: Run) -> str:
        return timezone.localtime(run.created_at).strftime("%m-%d %H:%M:%S")

    @admin.display(description="Run", ordering="id")
    def id_display(self, run: Run) -> str:
        return run.pk[:8]

    @admin.display(description="Agent", ordering="agent_name")
    def agent_display(self, run: Run) -> str:
        return run.agent_name

    @admin.display(description="Status", ordering="status")
    def status_display(self, run: Run) -> str:
        if not run.error_code:
            return run.get_status_display()
        return format_html(
            '{}<br><small title="{}">{}</small>',
            run.get_status_display(),
            run.error_code,
            run.error_code if len(run.error_code) <= 18 else run.error_code[:17] + "…",
        )

    @admin.display(description="User", ordering="thread__owner__username")
    def user(self, run: Run) -> str:
        owner = run.thread.owner
        return owner.get_username() if owner is not None else "anonymous"

    @admin.display(description="Limits tripped")
    def limits_tripped(self, run: Run) -> str:
        """Loop limits and circuit breakers that tripped in the run, by kind and count."""
        kinds: dict[str, int] = {}
        for trip in run.limit_trips or []:
            kinds[trip.get("kind", "?")] = kinds.get(trip.get("kind", "?"), 0) + 1
        return ", ".join(f"{kind} x{count}" for kind, count in kinds.items()) or "—"

    @admin.display(description="Tokens", ordering="tokens")
    def tokens_display(self, run: Run) -> str:
        return f"{run.input_tokens} / {run.output_tokens}"

    @admin.display(description="Cost", ordering="cost")
    def cost_display(self, run: Run) -> str:
        return cost_text(run.cost)

    @admin.display(description="Latency", ordering="latency")
    def latency_display(self, run: Run) -> str:
        return duration_text(_ms(getattr(run, "latency", None)) or run.duration_ms)

    @admin.display(description="First token", ordering="first_token")
    def first_token_display(self, run: Run) -> str:
        first = getattr(run, "first_token", None)
        if first is None and run.first_token_at and run.started_at:
            first = run.first_token_at - run.started_at
        return duration_text(_ms(first))

    @admin.display(description="Inspect")
    def inspect_link(self, run: Run) -> str:
        return format_html('<a href="{}">Spans</a>', run_inspect_url(run))

    @admin.action(description="Stop the selected runs", permissions=["stop_run"])
    def stop_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        active = queryset.filter(status__in=ACTIVE_RUN_STATUSES).values_list("pk", flat=True)
        stopped = sum(run_stop(run_id=run_id) for run_id in active)
        self.message_user(request, f"Asked {stopped} run(s) to stop.")

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("usage/", view(self.usage_view), name="conversations_run_usage"),
            path(
                "<path:object_id>/stop/",
                view(require_POST(self.stop_view)),
                name="conversations_run_stop",
            ),
            *super().get_urls(),
        ]

    def stop_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        run = self.get_object(request, object_id)
        if run is None or not self.has_stop_run_permission(request, run):
            raise PermissionDenied
        if run_stop(run_id=run.pk):
            self.message_user(request, f"Run {run.pk} was asked to stop.")
        else:
            self.message_user(request, f"Run {run.pk} had already ended.", messages.WARNING)
        target = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            target = reverse("admin:conversations_run_change", args=[run.pk])
        return HttpResponseRedirect(target)

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        """The report's old address: it lives on the admin index now (usage_page.py)."""
        target = reverse("admin:conversations_usagereport_changelist")
        query = request.META.get("QUERY_STRING", "")
        return HttpResponseRedirect(f"{target}?{query}" if query else target)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # The admin's navigation sidebar would take a quarter of a 1280 px window from the
        # columns; the breadcrumbs lead back.
        extra = {**(extra_context or {}), "is_nav_sidebar_enabled": False}
        return super().changelist_view(request, extra)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        run = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if run is not None:
            extra["inspect_url"] = run_inspect_url(run)
            extra["can_stop"] = run.status in ACTIVE_RUN_STATUSES and self.has_stop_run_permission(
                request, run
            )
        return super().change_view(request, object_id, form_url, extra)
