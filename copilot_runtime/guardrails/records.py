"""Storing a decision: one ``GuardrailEvaluation`` per rule checked, and a denied message
marked as such (it stays stored, failed, its reason starting with "denied")."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count, Q, QuerySet

from conversations.services.messages import message_mark_denied
from copilot_runtime.guardrails.verdicts import DENIED, Decision
from copilot_runtime.models import GuardrailEvaluation, GuardrailRule


@transaction.atomic
def guardrail_decision_store(
    *, run_id: str, agent_name: str, mode: str, decision: Decision, message_id: str
) -> None:
    # A rule deleted since the turn read it is recorded without its link.
    live_rule_ids = set(
        GuardrailRule.objects.filter(
            pk__in={r.rule.rule_id for r in decision.records if r.rule.rule_id is not None}
        ).values_list("pk", flat=True)
    )
    GuardrailEvaluation.objects.bulk_create(
        [
            GuardrailEvaluation(
                rule_id=record.rule.rule_id if record.rule.rule_id in live_rule_ids else None,
                run_id=run_id,
                source=record.rule.source,
                rule_kind=record.rule.kind,
                rule_match=record.rule.match,
                rule_text=record.rule.text,
                agent_name=agent_name,
                evaluator=record.evaluator,
                mode=mode,
                verdict=record.verdict,
                matched=record.matched,
                reason=record.reason,
                latency_ms=record.latency_ms,
            )
            for record in decision.records
        ]
    )
    if decision.denied and message_id:
        message_mark_denied(run_id=run_id, message_id=message_id, reason=decision.reason)


def rules_with_trip_counts() -> QuerySet[GuardrailRule]:
    """Rules annotated with ``trip_count`` (their denials) and ``evaluation_count``."""
    return GuardrailRule.objects.annotate(
        trip_count=Count("evaluations", filter=Q(evaluations__verdict=DENIED)),
        evaluation_count=Count("evaluations"),
    )


def rule_recent_evaluations(*, rule: GuardrailRule, limit: int = 20) -> list[GuardrailEvaluation]:
    return list(rule.evaluations.order_by("-created_at", "-pk")[:limit])
