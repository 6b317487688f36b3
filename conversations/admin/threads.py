"""Threads in the admin: the changelist, and each thread's session inspector."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from conversations.admin.export import thread_export_chunks
from conversations.admin.filters import ThreadErrorCodeFilter
from conversations.admin.inspector import thread_page
from conversations.admin.media import THUMBNAIL_FORMATS, thread_image_response
from conversations.admin.operations import thread_clear_interrupt, thread_has_pending_interrupt
from conversations.models import AgentState, Message, Run, RunEvent, Span, Thread
from conversations.selectors import agent_state_latest

INSPECT_TEMPLATE = "admin/conversations/thread/inspect.html"


# The rows a thread's deletion takes with it.
_THREAD_RECORDS = (Message, AgentState, Run, RunEvent, Span)


def _can(request: HttpRequest, codename: str) -> bool:
    return request.user.has_perm(f"conversations.{codename}")


def _cut(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    # Ids and titles are cut to a line (the whole text is their tooltip), so the list fits
    # at 1280 px with its filters.
    list_display = (
        "title_display",
        "thread_id_display",
        "owner",
        "agent_name",
        "status",
        "updated_at",
        "inspect_link",
    )
    list_display_links = ("title_display",)
    list_filter = (
        "status",
        "agent_name",
        ThreadErrorCodeFilter,
        "created_at",
        "updated_at",
        ("owner", admin.RelatedOnlyFieldListFilter),
    )
    search_fields = ("thread_id", "title", "owner__username", "messages__content")
    # A thread's title and metadata are edited here; who owns it, its agent and its status are
    # what its turns made them (a status set by hand would hold or free it behind its runs).
    readonly_fields = (
        "thread_id",
        "owner",
        "agent_name",
        "status",
        "created_at",
        "updated_at",
        "latest_agent_state",
    )
    list_select_related = ("owner",)
    date_hierarchy = "created_at"
    actions = ["clear_interrupts"]
    change_form_template = "admin/conversations/thread/change_form.html"
    change_list_template = "admin/conversations/thread/change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Thread]:
        return super().get_queryset(request).select_related("owner")

    # --- what the admin may do to a thread ----------------------------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a thread is made by its first turn

    def has_clear_interrupt_permission(
        self, request: HttpRequest, obj: Thread | None = None
    ) -> bool:
        return request.user.has_perm(f"{self.opts.app_label}.clear_interrupt")

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        """Deleting a thread takes its records with it on the thread's delete permission
        alone: those rows may not be deleted on their own (their admins give no delete
        permission), which Django would otherwise count as a permission missing."""
        deleted, counts, missing, protected = super().get_deleted_objects(objs, request)
        owned = {str(model._meta.verbose_name) for model in _THREAD_RECORDS}
        return deleted, counts, {name for name in missing if str(name) not in owned}, protected

    # --- the changelist ---------------------------------------------------------------------

    @admin.display(description="Title", ordering="title")
    def title_display(self, thread: Thread) -> str:
        title = thread.title or "(untitled)"
        return format_html('<span title="{}">{}</span>', title, _cut(title, 80))

    @admin.display(description="Thread id", ordering="thread_id")
    def thread_id_display(self, thread: Thread) -> str:
        return format_html(
            '<span title="{}">{}</span>', thread.thread_id, _cut(thread.thread_id, 14)
        )

    @admin.display(description="Inspect")
    def inspect_link(self, thread: Thread) -> str:
        url = reverse("admin:conversations_thread_inspect", args=[thread.pk])
        return format_html('<a href="{}">Inspect</a>', url)

    @admin.display(description="Latest agent state")
    def latest_agent_state(self, thread: Thread) -> str:
        latest = agent_state_latest(thread=thread, agent_name=thread.agent_name)
        if latest is None:
            return "—"
        rows = format_html_join(
            "", "<tr><th>{}</th><td>{}</td></tr>", ((k, v) for k, v in latest.state.items())
        )
        return format_html("<table>{}</table>", rows) if latest.state else "{}"

    @admin.action(
        description="Clear the pending interrupt of the selected threads",
        permissions=["clear_interrupt"],
    )
    def clear_interrupts(self, request: HttpRequest, queryset: QuerySet[Thread]) -> None:
        cleared = sum(
            thread_clear_interrupt(thread_pk=pk, cleared_by=request.user.get_username())
            for pk in queryset.values_list("pk", flat=True)
        )
        self.message_user(request, f"Cleared the pending interrupt of {cleared} thread(s).")

    # --- the inspector ----------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("open/", view(self.open_view), name="conversations_thread_open"),
            path(
                "<path:object_id>/inspect/",
                view(self.inspect_view),
                name="conversations_thread_inspect",
            ),
            path(
                "<path:object_id>/image/<int:message_pk>/",
                view(self.image_view),
                name="conversations_thread_image",
            ),
            path(
                "<path:object_id>/export/",
                view(self.export_view),
                name="conversations_thread_export",
            ),
            path(
                "<path:object_id>/clear-interrupt/",
                view(require_POST(self.clear_interrupt_view)),
                name="conversations_thread_clear_interrupt",
            ),
            *super().get_urls(),
        ]

    def _viewable_thread(self, request: HttpRequest, object_id: str) -> Thread:
        thread = self.get_object(request, object_id)
        if thread is None or not self.has_view_permission(request, thread):
            # The same answer for a thread that does not exist and one that may not be seen.
            raise PermissionDenied
        return thread

    def open_view(self, request: HttpRequest) -> HttpResponse:
        """The inspector of the thread a client names by its own id (``?thread=``), as the
        demo page knows it: the visitor's own thread of that id, else the anonymous one; the
        thread list searched for the id when neither exists."""
        thread_id = request.GET.get("thread", "")
        if not self.has_view_permission(request):
            raise PermissionDenied
        named = Thread.objects.filter(thread_id=thread_id).only("pk")
        own = named.filter(owner=request.user).first() if request.user.is_authenticated else None
        thread = own or named.filter(owner__isnull=True).first()
        if not thread_id or thread is None:
            changelist = reverse("admin:conversations_thread_changelist")
            return HttpResponseRedirect(f"{changelist}?{urlencode({'q': thread_id})}")
        return HttpResponseRedirect(reverse("admin:conversations_thread_inspect", args=[thread.pk]))

    def inspect_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        thread = self._viewable_thread(request, object_id)
        show = {
            "messages": _can(request, "view_message"),
            "states": _can(request, "view_agentstate"),
            "runs": _can(request, "view_run"),
            "spans": _can(request, "view_span"),
        }
        data = thread_page(
            thread=thread,
            page=request.GET.get("page", 1),
            query=request.GET.get("q", ""),
            runs_page_number=request.GET.get("runs_page", 1),
            run_id=request.GET.get("run") or None,
            spans_page=request.GET.get("spans_page", 1),
            show_messages=show["messages"],
            show_runs=show["runs"],
            show_spans=show["spans"],
        )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Session {thread.thread_id}",
            "subtitle": thread.title,
            "thread": thread,
            "page": data,
            "show": show,
            "can_change_thread": self.has_change_permission(request, thread),
            "can_clear_interrupt": self.has_clear_interrupt_permission(request, thread),
            "can_stop_run": _can(request, "stop_run"),
            "has_pending_interrupt": thread_has_pending_interrupt(thread),
            "query": request.GET.get("q", ""),
            "selected_run_id": data.trace.run.run.pk if data.trace else "",
            "thumbnail_formats": THUMBNAIL_FORMATS,
        }
        return TemplateResponse(request, INSPECT_TEMPLATE, context)

    def image_view(self, request: HttpRequest, object_id: str, message_pk: int) -> HttpResponse:
        thread = self._viewable_thread(request, object_id)
        if not _can(request, "view_message"):
            raise PermissionDenied
        return thread_image_response(thread=thread, message_pk=message_pk)

    def export_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        thread = self._viewable_thread(request, object_id)
        sections = [
            section
            for section, codename in (
                ("messages", "view_message"),
                ("agent_states", "view_agentstate"),
                ("runs", "view_run"),
                ("spans", "view_span"),
            )
            if _can(request, codename)
        ]
        response = StreamingHttpResponse(
            thread_export_chunks(thread=thread, sections=sections),
            content_type="application/json",
        )
        safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in thread.thread_id)
        response["Content-Disposition"] = f'attachment; filename="thread-{safe_name}.json"'
        return response

    def clear_interrupt_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        thread = self._viewable_thread(request, object_id)
        if not self.has_clear_interrupt_permission(request, thread):
            raise PermissionDenied
        if thread_clear_interrupt(thread_pk=thread.pk, cleared_by=request.user.get_username()):
            self.message_user(request, "The pending interrupt was cleared.")
        else:
            self.message_user(request, "This thread has no pending interrupt.", messages.WARNING)
        return HttpResponseRedirect(reverse("admin:conversations_thread_inspect", args=[thread.pk]))

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # As the run list: the columns take the navigation sidebar's room.
        extra = {**(extra_context or {}), "is_nav_sidebar_enabled": False}
        return super().changelist_view(request, extra)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra = {
            **(extra_context or {}),
            "inspect_url": reverse("admin:conversations_thread_inspect", args=[object_id]),
        }
        return super().change_view(request, object_id, form_url, extra)
