"""What keeps this process's caches in step with the admin's edits (connected once the apps are
ready: copilot_runtime/apps.py)."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from copilot_runtime.guardrails.rules import rules_cache_clear
from copilot_runtime.models import GuardrailRule, ModelPrice
from copilot_runtime.tracing.cost import prices_cache_clear


@receiver([post_save, post_delete], sender=ModelPrice)
def _forget_cached_prices(**_: object) -> None:
    # Runs price their model calls from a cached table; an edit applies at once in this process
    # (other processes re-read it within 30 seconds).
    prices_cache_clear()


@receiver([post_save, post_delete], sender=GuardrailRule)
def _forget_cached_rules(**_: object) -> None:
    # Turns read the rules from a short-lived cache; an admin edit applies to the next request.
    rules_cache_clear()
