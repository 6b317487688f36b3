"""Admin for the runtime's own configuration: API tokens and guardrail rules."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from copilot_runtime.auth import do_issue_token, do_revoke_token
from copilot_runtime.guardrails.records import rule_recent_evaluations, rules_with_trip_counts
from copilot_runtime.guardrails.regex import pattern_problem
from copilot_runtime.models import (
    ApiToken,
    GuardrailEvaluation,
    GuardrailMatch,
    GuardrailRule,
    ModelPrice,
    PriceSource,
)


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


class GuardrailRuleForm(forms.ModelForm):
    class Meta:
        model = GuardrailRule
        fields = (
            "name",
            "kind",
            "match",
            "text",
            "denial_text",
            "agent_name",
            "enabled",
            "priority",
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        text = (cleaned.get("text") or "").strip()
        if not text:
            self.add_error("text", "A rule needs a topic or a pattern.")
        elif cleaned.get("match") == GuardrailMatch.PATTERN:
            # Checked as the local evaluator will run it (RE2, linear time): a pattern it
            # cannot run is refused here, with the reason, rather than failing every turn.
            problem = pattern_problem(text)
            if problem:
                self.add_error("text", f"{problem[0].upper()}{problem[1:]}.")
        return cleaned


_EVALUATIONS_SHOWN = 20


@admin.register(GuardrailRule)
class GuardrailRuleAdmin(admin.ModelAdmin):
    form = GuardrailRuleForm
    list_display = (
        "name",
        "kind",
        "match",
        "scope",
        "enabled",
        "priority",
        "trip_count",
        "evaluation_count",
        "updated_at",
    )
    list_filter = ("kind", "match", "enabled", "agent_name")
    search_fields = ("name", "text", "agent_name")
    list_editable = ("enabled", "priority")
    readonly_fields = ("trip_count", "evaluation_count", "recent_evaluations")

    def get_queryset(self, request: HttpRequest) -> QuerySet[GuardrailRule]:
        return rules_with_trip_counts()

    @admin.display(description="Trips", ordering="trip_count")
    def trip_count(self, rule: GuardrailRule) -> int:
        """Evaluations in which this rule refused a message."""
        return int(getattr(rule, "trip_count", 0) or 0)

    @admin.display(description="Evaluations", ordering="evaluation_count")
    def evaluation_count(self, rule: GuardrailRule) -> int:
        return int(getattr(rule, "evaluation_count", 0) or 0)

    @admin.display(description="Recent evaluations")
    def recent_evaluations(self, rule: GuardrailRule) -> str:
        if rule.pk is None:
            return "—"
        evaluations = rule_recent_evaluations(rule=rule, limit=_EVALUATIONS_SHOWN)
        if not evaluations:
            return "Not evaluated yet."
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ms</td><td>{}</td>"
            "<td>{}</td></tr>",
            (
                (
                    evaluation.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                    evaluation.get_verdict_display(),
                    evaluation.evaluator,
                    _matched_text(evaluation.matched),
                    evaluation.latency_ms,
                    evaluation.reason or "—",
                    _run_link(evaluation.run_id),
                )
                for evaluation in evaluations
            ),
        )
        everything = reverse("admin:copilot_runtime_guardrailevaluation_changelist")
        return format_html(
            "<table><thead><tr><th>When</th><th>Verdict</th><th>Evaluator</th><th>Matched</th>"
            "<th>Latency</th><th>Reason</th><th>Run</th></tr></thead><tbody>{}</tbody></table>"
            '<p><a href="{}?rule__id__exact={}">All evaluations of this rule</a></p>',
            rows,
            everything,
            rule.pk,
        )


def _matched_text(matched: bool | None) -> str:
    return "unknown" if matched is None else ("yes" if matched else "no")


def _run_link(run_id: str | None) -> str:
    if not run_id:
        return "—"
    url = reverse("admin:conversations_run_change", args=[run_id])
    return format_html('<a href="{}">{}</a>', url, run_id[:8])


@admin.register(GuardrailEvaluation)
class GuardrailEvaluationAdmin(admin.ModelAdmin):
    """Every rule checked on every message; a record (the engine writes them): viewed, never
    added, changed or deleted here."""

    list_display = (
        "created_at",
        "verdict",
        "rule_display",
        "rule_kind",
        "rule_match",
        "source",
        "evaluator",
        "mode",
        "matched",
        "latency_ms",
        "agent_name",
        "run",
    )
    list_filter = ("verdict", "evaluator", "mode", "source", "rule_kind", "rule_match")
    search_fields = ("rule_text", "reason", "rule__name", "run__id", "agent_name")
    raw_id_fields = ("rule", "run")
    list_select_related = ("rule", "run")
    date_hierarchy = "created_at"

    @admin.display(description="Rule", ordering="rule_text")
    def rule_display(self, evaluation: GuardrailEvaluation) -> str:
        if evaluation.rule is not None:
            return evaluation.rule.name
        return f"{evaluation.rule_text} (from the request)"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(
        self, request: HttpRequest, obj: GuardrailEvaluation | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: GuardrailEvaluation | None = None
    ) -> bool:
        return False  # a record; it outlives its run and its rule, their links cleared


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """Prices per million tokens; each model call's cost (and each run's) is computed with
    them when the run ends (copilot_runtime/tracing/cost.py)."""

    list_display = (
        "model",
        "input_per_million",
        "cached_input_per_million",
        "cache_write_input_per_million",
        "output_per_million",
        "source",
        "updated_at",
    )
    list_editable = (
        "input_per_million",
        "cached_input_per_million",
        "cache_write_input_per_million",
        "output_per_million",
    )
    list_filter = ("source",)
    search_fields = ("model",)
    readonly_fields = ("source",)

    def save_model(self, request: HttpRequest, obj: ModelPrice, form: Any, change: bool) -> None:
        # A price set here is the project's own: seeding from the table never overwrites it.
        obj.source = PriceSource.ADMIN
        super().save_model(request, obj, form, change)
