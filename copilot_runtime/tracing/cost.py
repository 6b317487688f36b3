"""What a model call costs: token usage times the model's price (``ModelPrice`` in the admin).

Input tokens include cached ones and those written to the cache (the provider's
``prompt_tokens``, and OpenTelemetry's ``gen_ai.usage.input_tokens``), so cached tokens are
priced at the cached rate, cache writes at the cache-write rate, and only the rest at the input
rate. Reasoning tokens are part of the output tokens and priced with them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from conversations.store.health import db_sync_to_async
from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing.records import SpanRecord
from copilot_runtime.tracing.signals import KIND_GENERATION, KIND_GUARDRAIL

MILLION = Decimal(1_000_000)
# Run.cost keeps ten decimal places: one token of a cheap model is a fraction of a micro-dollar.
COST_QUANTUM = Decimal("1e-10")


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens."""

    input_per_million: Decimal
    output_per_million: Decimal
    # None: cached input, and input written to the cache, cost the same as input.
    cached_input_per_million: Decimal | None = None
    cache_write_input_per_million: Decimal | None = None


def usage_cost(
    *,
    price: Price,
    input_tokens: int,
    output_tokens: int,
    cached_input_tokens: int = 0,
    cache_write_input_tokens: int = 0,
) -> Decimal:
    cached = max(0, min(cached_input_tokens, input_tokens))
    written = max(0, min(cache_write_input_tokens, input_tokens - cached))
    total = (
        (input_tokens - cached - written) * price.input_per_million
        + cached * _or_input(price.cached_input_per_million, price)
        + written * _or_input(price.cache_write_input_per_million, price)
        + output_tokens * price.output_per_million
    )
    return (total / MILLION).quantize(COST_QUANTUM)


def _or_input(rate: Decimal | None, price: Price) -> Decimal:
    return price.input_per_million if rate is None else rate


def price_for_model(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The price of ``model``: its own row, else the longest priced name it starts with
    (a provider's dated snapshot, ``gpt-4o-mini-2024-07-18``, is priced as ``gpt-4o-mini``)."""
    if not model:
        return None
    exact = prices.get(model)
    if exact is not None:
        return exact
    prefixes = [name for name in prices if name and model.startswith(name)]
    return prices[max(prefixes, key=len)] if prefixes else None


_PRICES_TTL_SECONDS = 30.0
_prices_cache: tuple[float, dict[str, Price]] | None = None


async def prices_cached() -> dict[str, Price]:
    """The price table, read at most every 30 s: each run's end prices its model calls, and an
    admin's edit applies within that time."""
    global _prices_cache
    cached = _prices_cache
    if cached is not None and time.monotonic() - cached[0] < _PRICES_TTL_SECONDS:
        return cached[1]
    prices = await db_sync_to_async(prices_load)()
    _prices_cache = (time.monotonic(), prices)
    return prices


def prices_cache_clear() -> None:
    global _prices_cache
    _prices_cache = None


def prices_load() -> dict[str, Price]:
    """Every price in the table (a handful of rows), by model name."""
    from copilot_runtime.models import ModelPrice

    return {
        row.model: Price(
            input_per_million=row.input_per_million,
            output_per_million=row.output_per_million,
            cached_input_per_million=row.cached_input_per_million,
            cache_write_input_per_million=row.cache_write_input_per_million,
        )
        for row in ModelPrice.objects.all()
    }


def spans_price(*, records: list[SpanRecord], prices: dict[str, Price]) -> Decimal | None:
    """Put each priced model call's cost on its span, and the sum on the run span; returns
    the sum (None when no call could be priced). A model call that never reported its usage
    (cut off) has no cost."""
    total: Decimal | None = None
    for record in records:
        # Model calls, and guardrail checks that asked a model (a classifier).
        if record.kind not in (KIND_GENERATION, KIND_GUARDRAIL):
            continue
        attributes = record.attributes
        model = attributes.get(attr.RESPONSE_MODEL) or attributes.get(attr.REQUEST_MODEL) or ""
        if not model or attr.USAGE_INPUT_TOKENS not in attributes:
            continue
        price = price_for_model(str(model), prices)
        if price is None:
            continue
        cost = usage_cost(
            price=price,
            input_tokens=int(attributes.get(attr.USAGE_INPUT_TOKENS) or 0),
            output_tokens=int(attributes.get(attr.USAGE_OUTPUT_TOKENS) or 0),
            cached_input_tokens=int(attributes.get(attr.USAGE_CACHE_READ_INPUT_TOKENS) or 0),
            cache_write_input_tokens=int(
                attributes.get(attr.USAGE_CACHE_CREATION_INPUT_TOKENS) or 0
            ),
        )
        attributes[attr.USAGE_COST] = float(cost)
        total = cost if total is None else total + cost
    if total is not None:
        for record in records:
            if not record.parent_span_id:
                record.attributes[attr.USAGE_COST] = float(total)
    return total
