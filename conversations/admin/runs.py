"""Runs in the admin: the changelist with usage and cost, stopping runs, the usage report."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_POST

from conversations.admin.inspector import ACTIVE_RUN_STATUSES
from conversations.admin.operations import run_stop
from conversations.admin.rendering import cost_text, duration_text
from conversations.models import Run


def run_inspect_url(run: Run) -> str:
    """The run's thread in the inspector, with this run's waterfall shown."""
    url = reverse("admin:conversations_thread_inspect", args=[run.thread_id])
    return f"{url}?{urlencode({'run': run.pk})}#waterfall"


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "thread",
        "agent_name",
        "status",
        "error_code",
        "limits_tripped",
        "model",
        "input_tokens",
        "output_tokens",
        "cost_display",
        "duration_display",
        "created_at",
        "inspect_link",
    )
    list_filter = ("status", "agent_name", "error_code", "protocol", "model", "created_at")
    search_fields = ("id", "thread__thread_id", "error_code")
    raw_id_fields = ("thread",)
    list_select_related = ("thread",)
    date_hierarchy = "created_at"
    actions = ["stop_runs"]
    change_form_template = "admin/conversations/run/change_form.html"
    change_list_template = "admin/conversations/run/change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        # The stored request can be large; no page of the run admin shows it.
        return super().get_queryset(request).defer("request_payload")

    @admin.display(description="Limits tripped")
    def limits_tripped(self, run: Run) -> str:
        """Loop limits and circuit breakers that tripped in the run, by kind and count."""
        kinds: dict[str, int] = {}
        for trip in run.limit_trips or []:
            kinds[trip.get("kind", "?")] = kinds.get(trip.get("kind", "?"), 0) + 1
        return ", ".join(f"{kind} x{count}" for kind, count in kinds.items()) or "—"

    @admin.display(description="Cost", ordering="cost")
    def cost_display(self, run: Run) -> str:
        return cost_text(run.cost)

    @admin.display(description="Duration")
    def duration_display(self, run: Run) -> str:
        return duration_text(run.duration_ms)

    @admin.display(description="Inspect")
    def inspect_link(self, run: Run) -> str:
        return format_html('<a href="{}">Spans</a>', run_inspect_url(run))

    @admin.action(description="Stop the selected runs")
    def stop_runs(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        if not self.has_change_permission(request):
            raise PermissionDenied
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
        if run is None or not self.has_change_permission(request, run):
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
            extra["can_stop"] = run.status in ACTIVE_RUN_STATUSES and self.has_change_permission(
                request, run
            )
        return super().change_view(request, object_id, form_url, extra)
