"""Model prices are edited in the admin, and the next run is priced with them."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from copilot_runtime.models import ModelPrice
from copilot_runtime.tracing.cost import price_for_model, prices_load

pytestmark = pytest.mark.django_db


def test_a_price_added_in_the_admin_prices_the_model(admin_client: Client) -> None:
    response = admin_client.post(
        reverse("admin:copilot_runtime_modelprice_add"),
        {
            "model": "gpt-4o-mini",
            "input_per_million": "0.15",
            "cached_input_per_million": "",
            "output_per_million": "0.60",
            "_save": "Save",
        },
    )

    assert response.status_code == 302
    price = price_for_model("gpt-4o-mini-2024-07-18", prices_load())
    assert price is not None
    assert (price.input_per_million, price.cached_input_per_million) == (Decimal("0.15"), None)


def test_prices_are_edited_in_the_list(admin_client: Client) -> None:
    row = ModelPrice.objects.create(model="m", input_per_million=1, output_per_million=2)
    changelist = reverse("admin:copilot_runtime_modelprice_changelist")
    assert "Model prices" in admin_client.get(reverse("admin:index")).content.decode()

    response = admin_client.post(
        changelist,
        {
            "form-TOTAL_FORMS": "1",
            "form-INITIAL_FORMS": "1",
            "form-0-id": str(row.pk),
            "form-0-input_per_million": "3",
            "form-0-cached_input_per_million": "1.5",
            "form-0-cache_write_input_per_million": "5",
            "form-0-output_per_million": "4",
            "_save": "Save",
        },
    )

    assert response.status_code == 302
    row.refresh_from_db()
    assert (row.input_per_million, row.cached_input_per_million, row.output_per_million) == (
        Decimal(3),
        Decimal("1.5"),
        Decimal(4),
    )
    assert row.cache_write_input_per_million == Decimal(5)
