"""Changelists of the conversation rows: messages, agent states, run events, spans.

They are the record of what happened: viewed, never added, changed or deleted here (a
thread's deletion takes its rows with it; the retention purge removes old logs and spans).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from conversations.models import AgentState, Message, RunEvent, Span


class RecordAdmin(admin.ModelAdmin):
    """A read-only admin: the view permission shows a row, nothing writes one."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Every field, editable or not (a timestamp set on creation included).
        return [field.name for field in self.opts.concrete_fields]


@admin.register(Message)
class MessageAdmin(RecordAdmin):
    list_display = ("message_id", "thread", "position", "kind", "role", "status", "created_at")
    list_filter = ("kind", "role", "status", "superseded")
    search_fields = ("message_id", "content", "thread__thread_id")
    list_select_related = ("thread",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # A payload sent as base64 can be megabytes; the inspector shows it as a thumbnail.
        return [name for name in super().get_readonly_fields(request, obj) if name != "image_bytes"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return self.get_readonly_fields(request, obj)


@admin.register(AgentState)
class AgentStateAdmin(RecordAdmin):
    list_display = ("thread", "agent_name", "node_name", "running", "created_at")
    list_filter = ("agent_name", "running", "active")
    search_fields = ("thread__thread_id", "agent_name", "run_id")
    list_select_related = ("thread",)


@admin.register(RunEvent)
class RunEventAdmin(RecordAdmin):
    list_display = ("run", "seq", "type", "created_at")
    list_filter = ("type",)
    search_fields = ("run__id",)


@admin.register(Span)
class SpanAdmin(RecordAdmin):
    list_display = ("name", "kind", "run", "is_error", "is_complete", "started_at", "ended_at")
    list_filter = ("kind", "is_error", "is_complete")
    search_fields = ("name", "trace_id", "span_id", "run__id")
