"""Plain changelists of the conversation rows: messages, agent states, run events, spans."""

from __future__ import annotations

from django.contrib import admin

from conversations.models import AgentState, Message, RunEvent, Span


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
