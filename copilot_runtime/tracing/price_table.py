"""Model prices seeded from a maintained price table (the ``genai-prices`` package).

``seed_model_prices`` writes one ``ModelPrice`` row per model of the providers' own APIs
(OpenAI, Anthropic, Google, Mistral...; the first provider listing a model wins), at the
table's current prices. Rows changed in the admin are the project's own and are never
overwritten; seeded rows are refreshed when the package's table changes. The package is
imported only here (a command, not a web request): it brings pydantic, which a web process does
without.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import transaction

from copilot_runtime.models import ModelPrice, PriceSource

# Providers whose own API a runtime talks to, in order of preference for a model listed by
# several (resellers and aggregators list the same model ids at other prices).
PREFERRED_PROVIDERS = (
    "openai",
    "anthropic",
    "google",
    "mistral",
    "deepseek",
    "x-ai",
    "cohere",
    "groq",
    "perplexity",
    "together",
    "aws",
    "azure",
)


@dataclass(frozen=True, slots=True)
class TablePrice:
    model: str
    input_per_million: Decimal
    cached_input_per_million: Decimal | None
    output_per_million: Decimal
    cache_write_input_per_million: Decimal | None = None


def _flat(value: Any) -> Decimal | None:
    """A price per million tokens; a tiered price counts at its base tier."""
    if isinstance(value, Decimal):
        return value
    base = getattr(value, "base", None)
    return base if isinstance(base, Decimal) else None


def _current(prices: Any) -> Any:
    """The model's price now: a list of conditional prices ends with the latest."""
    if isinstance(prices, list):
        return prices[-1].prices if prices else None
    return prices


def table_prices() -> list[TablePrice]:
    from genai_prices import data  # imported on use: see the module docstring

    by_id = {provider.id: provider for provider in data.providers}
    found: dict[str, TablePrice] = {}
    for provider_id in PREFERRED_PROVIDERS:
        provider = by_id.get(provider_id)
        for model in provider.models if provider is not None else ():
            price = _current(model.prices)
            input_price = _flat(getattr(price, "input_mtok", None))
            output_price = _flat(getattr(price, "output_mtok", None))
            if model.id in found or input_price is None or output_price is None:
                continue
            found[model.id] = TablePrice(
                model=model.id,
                input_per_million=input_price,
                cached_input_per_million=_flat(getattr(price, "cache_read_mtok", None)),
                output_per_million=output_price,
                cache_write_input_per_million=_flat(getattr(price, "cache_write_mtok", None)),
            )
    return sorted(found.values(), key=lambda price: price.model)


@dataclass(frozen=True, slots=True)
class SeedResult:
    created: int
    updated: int
    kept: int  # rows the admin owns


@transaction.atomic
def seed_model_prices(*, prices: list[TablePrice] | None = None) -> SeedResult:
    table = table_prices() if prices is None else prices
    existing = {row.model: row for row in ModelPrice.objects.select_for_update()}
    created = updated = kept = 0
    for price in table:
        row = existing.get(price.model)
        values = {
            "input_per_million": price.input_per_million,
            "cached_input_per_million": price.cached_input_per_million,
            "cache_write_input_per_million": price.cache_write_input_per_million,
            "output_per_million": price.output_per_million,
        }
        if row is None:
            ModelPrice.objects.create(model=price.model, source=PriceSource.TABLE, **values)
            created += 1
        elif row.source != PriceSource.TABLE:
            kept += 1
        elif any(getattr(row, key) != value for key, value in values.items()):
            ModelPrice.objects.filter(pk=row.pk).update(**values)
            updated += 1
    return SeedResult(created=created, updated=updated, kept=kept)
