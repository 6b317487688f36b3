"""Admin for the runtime's own configuration: API tokens and guardrail rules."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from copilot_runtime.auth import do_issue_token, do_revoke_token
from copilot_runtime.models import ApiToken, GuardrailRule


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "token_prefix", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at", "created_at")
    search_fields = ("name", "user__username", "token_prefix")
    readonly_fields = ("token_prefix", "created_at", "last_used_at", "revoked_at")
    fields = ("name", "user", "token_prefix", "created_at", "last_used_at", "revoked_at")
    raw_id_fields = ("user",)
    actions = ["revoke_tokens"]

    def save_model(
        self, request: HttpRequest, obj: ApiToken, form: ModelForm, change: bool
    ) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, raw = do_issue_token(user=obj.user, name=obj.name)
        obj.pk = token.pk
        obj.token_prefix = token.token_prefix
        obj.token_hash = token.token_hash
        obj.created_at = token.created_at
        # Shown once: only the hash is stored.
        self.message_user(
            request,
            f"Token issued. Copy it now, it will not be shown again: {raw}",
            level=messages.WARNING,
        )

    @admin.action(description="Revoke the selected tokens")
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            do_revoke_token(token=token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).")


@admin.register(GuardrailRule)
class GuardrailRuleAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "match", "scope", "enabled", "priority", "updated_at")
    list_filter = ("kind", "match", "enabled", "agent_name")
    search_fields = ("name", "text", "agent_name")
    list_editable = ("enabled", "priority")
