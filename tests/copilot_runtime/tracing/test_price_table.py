"""Model prices seeded from the genai-prices table; the admin's own prices are kept."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from copilot_runtime.models import ModelPrice, PriceSource
from copilot_runtime.tracing.price_table import TablePrice, seed_model_prices, table_prices

pytestmark = pytest.mark.django_db


def test_the_table_prices_the_providers_current_models() -> None:
    prices = {price.model: price for price in table_prices()}
    # A few models a runtime is pointed at, from their own providers' APIs.
    for model in ("gpt-4o", "claude-sonnet-4-5", "gemini-2.5-flash"):
        assert model in prices, model
        assert prices[model].input_per_million > 0 and prices[model].output_per_million > 0
    assert prices["gpt-4o"].input_per_million < prices["gpt-4o"].output_per_million
    # Anthropic prices writes to its prompt cache above its input; OpenAI has no such price.
    sonnet = prices["claude-sonnet-4-5"]
    assert sonnet.cache_write_input_per_million is not None
    assert sonnet.cache_write_input_per_million > sonnet.input_per_million
    assert prices["gpt-4o"].cache_write_input_per_million is None


def test_seeding_fills_refreshes_and_keeps_the_admins_prices() -> None:
    table = [
        TablePrice("model-a", Decimal("1"), Decimal("0.5"), Decimal("2")),
        TablePrice("model-b", Decimal("3"), None, Decimal("4")),
    ]
    first = seed_model_prices(prices=table)
    assert (first.created, first.updated, first.kept) == (2, 0, 0)
    a = ModelPrice.objects.get(model="model-a")
    assert (a.input_per_million, a.cached_input_per_million, a.source) == (
        Decimal("1"),
        Decimal("0.5"),
        PriceSource.TABLE,
    )

    # The project sets its own price for model-b; the table changes model-a's.
    ModelPrice.objects.filter(model="model-b").update(
        input_per_million=Decimal("9"), source=PriceSource.ADMIN
    )
    table[0] = TablePrice("model-a", Decimal("1.5"), Decimal("0.5"), Decimal("2"), Decimal("2.5"))
    second = seed_model_prices(prices=table)
    assert (second.created, second.updated, second.kept) == (0, 1, 1)
    a = ModelPrice.objects.get(model="model-a")
    assert (a.input_per_million, a.cache_write_input_per_million) == (
        Decimal("1.5"),
        Decimal("2.5"),
    )
    assert ModelPrice.objects.get(model="model-b").input_per_million == Decimal("9")
    assert seed_model_prices(prices=table).updated == 0  # nothing changed: nothing written


def test_the_command_seeds_from_the_package(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("seed_model_prices")
    out = capsys.readouterr().out
    assert "added" in out and ModelPrice.objects.filter(source=PriceSource.TABLE).count() > 50
    assert ModelPrice.objects.get(model="gpt-4o").output_per_million > 0


def test_a_price_changed_in_the_admin_becomes_the_projects_own(admin_client: Client) -> None:
    seed_model_prices(prices=[TablePrice("model-a", Decimal("1"), None, Decimal("2"))])
    row = ModelPrice.objects.get(model="model-a")
    response = admin_client.post(
        reverse("admin:copilot_runtime_modelprice_change", args=[row.pk]),
        {
            "model": "model-a",
            "input_per_million": "7",
            "cached_input_per_million": "",
            "output_per_million": "8",
        },
    )
    assert response.status_code == 302, response.content[:500]
    row.refresh_from_db()
    assert (row.input_per_million, row.source) == (Decimal("7"), PriceSource.ADMIN)
    assert (
        seed_model_prices(prices=[TablePrice("model-a", Decimal("1"), None, Decimal("2"))]).kept
        == 1
    )
