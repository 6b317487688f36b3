"""``manage.py seed_model_prices``: model prices from the genai-prices table (rows changed in
the admin are kept)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from copilot_runtime.tracing.price_table import seed_model_prices


class Command(BaseCommand):
    help = "Seed (or refresh) the model prices from the genai-prices table; admin edits are kept."

    def handle(self, *args: Any, **options: Any) -> None:
        result = seed_model_prices()
        self.stdout.write(
            f"model prices: {result.created} added, {result.updated} updated from the table, "
            f"{result.kept} kept as set in the admin"
        )
