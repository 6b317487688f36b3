"""The admin skeleton: every model with useful columns, filters and search."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from conversations.models import AgentState, Message, Run, RunEvent, Span, Thread
from conversations.selectors import agent_state_latest


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("position", "kind", "role", "content", "action_name", "status", "superseded")
    readonly_fields = fields
    ordering = ("position",)
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Thread | None = None) -> bool:
        return False


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ("thread_id", "title", "owner", "agent_name", "status", "updated_at")
    list_filter = ("status", "agent_name", "created_at")
    search_fields = ("thread_id", "title", "owner__username", "messages__content")
    readonly_fields = ("thread_id", "created_at", "updated_at", "latest_agent_state")
    raw_id_fields = ("owner",)
    inlines = [MessageInline]

    @admin.display(description="Latest agent state")
    def latest_agent_state(self, thread: Thread) -> str:
        latest = agent_state_latest(thread=thread, agent_name=thread.agent_name)
        if latest is None:
            return "—"
        rows = format_html_join(
            "", "<tr><th>{}</th><td>{}</td></tr>", ((k, v) for k, v in latest.state.items())
        )
        return format_html("<table>{}</table>", rows) if latest.state else "{}"


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("message_id", "thread", "position", "kind", "role", "status", "created_at")
    list_filter = ("kind", "role", "status", "superseded")
    search_fields = ("message_id", "content", "thread__thread_id")
    raw_id_fields = ("thread", "run")
    list_select_related = ("thread",)


@admin.register(AgentState)
class AgentStateAdmin(admin.ModelAdmin):
    list_display = ("thread", "agent_name", "node_name", "running", "created_at")
    list_filter = ("agent_name", "running", "active")
    search_fields = ("thread__thread_id", "agent_name", "run_id")
    raw_id_fields = ("thread",)
    list_select_related = ("thread",)


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
        "created_at",
    )
    list_filter = ("status", "agent_name", "error_code", "protocol", "created_at")
    search_fields = ("id", "thread__thread_id", "error_code")
    raw_id_fields = ("thread",)
    list_select_related = ("thread",)

    @admin.display(description="Limits tripped")
    def limits_tripped(self, run: Run) -> str:
        """Loop limits and circuit breakers that tripped in the run, by kind and count."""
        kinds: dict[str, int] = {}
        for trip in run.limit_trips or []:
            kinds[trip.get("kind", "?")] = kinds.get(trip.get("kind", "?"), 0) + 1
        return ", ".join(f"{kind} x{count}" for kind, count in kinds.items()) or "—"


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ("run", "seq", "type", "created_at")
    list_filter = ("type",)
    search_fields = ("run__id",)
    raw_id_fields = ("run",)


@admin.register(Span)
class SpanAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "run", "is_error", "is_complete", "started_at", "ended_at")
    list_filter = ("kind", "is_error", "is_complete")
    search_fields = ("name", "trace_id", "span_id", "run__id")
    raw_id_fields = ("run",)
