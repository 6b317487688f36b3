"""What the runtime does about the admin's edits and requests: caches kept in step with edited
rules and prices, and a run stopped when the inspector asks (connected once the apps are ready:
copilot_runtime/apps.py)."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from conversations.signals import run_stop_requested
from copilot_runtime.guardrails.rules import rules_cache_clear
from copilot_runtime.models import GuardrailRule, ModelPrice
from copilot_runtime.runs.executor import run_cancel
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


@receiver(run_stop_requested)
def _stop_run(*, run_id: str, **_: object) -> bool:
    # Under ASGI the admin's view runs on the server's event loop, where an inline run's task
    # lives; a worker's run is told on the channel layer.
    return bool(async_to_sync(run_cancel)(run_id=run_id))
