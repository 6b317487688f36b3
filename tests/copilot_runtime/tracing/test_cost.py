"""Cost: token usage times the model's price, and the price of a model name."""

from __future__ import annotations

from decimal import Decimal

import pytest

from copilot_runtime.models import ModelPrice
from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing.cost import (
    Price,
    price_for_model,
    prices_load,
    spans_price,
    usage_cost,
)
from copilot_runtime.tracing.records import SpanRecord

MINI = Price(
    input_per_million=Decimal("0.15"),
    output_per_million=Decimal("0.60"),
    cached_input_per_million=Decimal("0.075"),
)


def test_cached_input_is_priced_at_its_own_rate_and_the_rest_at_the_input_rate() -> None:
    cost = usage_cost(
        price=MINI, input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=500_000
    )
    # 600k x 0.15 + 400k x 0.075 + 500k x 0.60, per million.
    assert cost == Decimal("0.09") + Decimal("0.03") + Decimal("0.30")


SONNET = Price(
    input_per_million=Decimal("3"),
    output_per_million=Decimal("15"),
    cached_input_per_million=Decimal("0.3"),
    cache_write_input_per_million=Decimal("3.75"),
)


def test_input_written_to_the_cache_is_priced_at_the_cache_write_rate() -> None:
    cost = usage_cost(
        price=SONNET,
        input_tokens=1_000_000,
        cached_input_tokens=500_000,
        cache_write_input_tokens=200_000,
        output_tokens=0,
    )
    # 300k x 3 + 500k x 0.3 + 200k x 3.75, per million.
    assert cost == Decimal("0.9") + Decimal("0.15") + Decimal("0.75")
    # Without a cache-write rate, the writes cost the input price; never more tokens than
    # the input holds besides the cached ones.
    assert usage_cost(
        price=MINI,
        input_tokens=100,
        output_tokens=0,
        cached_input_tokens=60,
        cache_write_input_tokens=90,
    ) == usage_cost(price=MINI, input_tokens=100, output_tokens=0, cached_input_tokens=60)


def test_without_a_cached_rate_cached_input_costs_the_input_price() -> None:
    price = Price(input_per_million=Decimal("2"), output_per_million=Decimal("8"))

    assert usage_cost(
        price=price, input_tokens=1000, cached_input_tokens=1000, output_tokens=0
    ) == (Decimal("0.002"))


def test_a_few_tokens_keep_their_fraction_of_a_cent() -> None:
    assert usage_cost(price=MINI, input_tokens=7, output_tokens=3) == Decimal("0.00000285")


def test_more_cached_than_input_tokens_is_capped_at_the_input() -> None:
    assert usage_cost(
        price=MINI, input_tokens=100, cached_input_tokens=500, output_tokens=0
    ) == Decimal("0.0000075")


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o-mini", "mini"),
        ("gpt-4o-mini-2024-07-18", "mini"),  # a dated snapshot
        ("gpt-4o-2024-08-06", "4o"),  # the longest priced prefix wins
        ("gpt-4o", "4o"),
        ("claude-3", None),
        ("", None),
    ],
)
def test_price_for_model_exact_then_longest_prefix(model: str, expected: str | None) -> None:
    prices = {
        "gpt-4o": Price(input_per_million=Decimal(2), output_per_million=Decimal(8)),
        "gpt-4o-mini": MINI,
    }
    found = price_for_model(model, prices)
    names = {id(MINI): "mini", id(prices["gpt-4o"]): "4o"}

    assert (names[id(found)] if found is not None else None) == expected


def _generation(
    model: str, *, input_tokens: int, output_tokens: int, parent: str, **usage: int
) -> SpanRecord:
    return SpanRecord(
        key="g",
        span_id="1" * 16,
        parent_span_id=parent,
        kind="generation",
        name=f"chat {model}",
        started_at=0.0,
        attributes={
            attr.REQUEST_MODEL: model,
            attr.RESPONSE_MODEL: model,
            attr.USAGE_INPUT_TOKENS: input_tokens,
            attr.USAGE_OUTPUT_TOKENS: output_tokens,
            **usage,
        },
    )


def test_spans_price_puts_cost_on_each_priced_call_and_the_sum_on_the_run() -> None:
    root = SpanRecord(
        key="run", span_id="0" * 16, parent_span_id="", kind="run", name="r", started_at=0.0
    )
    first = _generation("gpt-4o-mini", input_tokens=1_000_000, output_tokens=0, parent=root.span_id)
    second = _generation(
        "gpt-4o-mini", input_tokens=0, output_tokens=1_000_000, parent=root.span_id
    )
    unpriced = _generation("other-model", input_tokens=5, output_tokens=5, parent=root.span_id)

    total = spans_price(records=[root, first, second, unpriced], prices={"gpt-4o-mini": MINI})

    assert total == Decimal("0.75")
    assert first.attributes[attr.USAGE_COST] == pytest.approx(0.15)
    assert second.attributes[attr.USAGE_COST] == pytest.approx(0.60)
    assert attr.USAGE_COST not in unpriced.attributes
    assert root.attributes[attr.USAGE_COST] == pytest.approx(0.75)


def test_spans_price_reads_the_cache_reads_and_writes_of_each_call() -> None:
    root = SpanRecord(
        key="run", span_id="0" * 16, parent_span_id="", kind="run", name="r", started_at=0.0
    )
    call = _generation(
        "claude-sonnet-4-5",
        input_tokens=1_000_000,
        output_tokens=0,
        parent=root.span_id,
        **{
            attr.USAGE_CACHE_READ_INPUT_TOKENS: 500_000,
            attr.USAGE_CACHE_CREATION_INPUT_TOKENS: 200_000,
        },
    )

    assert spans_price(records=[root, call], prices={"claude-sonnet-4-5": SONNET}) == Decimal("1.8")


def test_spans_price_without_any_price_is_none() -> None:
    root = SpanRecord(
        key="run", span_id="0" * 16, parent_span_id="", kind="run", name="r", started_at=0.0
    )

    assert spans_price(records=[root], prices={}) is None
    assert attr.USAGE_COST not in root.attributes


@pytest.mark.django_db
def test_prices_load_reads_the_admin_table() -> None:
    ModelPrice.objects.create(
        model="gpt-4o-mini", input_per_million="0.15", output_per_million="0.6"
    )
    ModelPrice.objects.create(
        model="claude-sonnet-4-5",
        input_per_million="3",
        cached_input_per_million="0.3",
        cache_write_input_per_million="3.75",
        output_per_million="15",
    )

    prices = prices_load()

    assert prices == {
        "gpt-4o-mini": Price(
            input_per_million=Decimal("0.150000"),
            output_per_million=Decimal("0.600000"),
            cached_input_per_million=None,
        ),
        "claude-sonnet-4-5": SONNET,
    }


def test_a_guardrail_classifier_call_is_priced_and_a_cut_off_call_is_not() -> None:
    root = SpanRecord(
        key="run", span_id="0" * 16, parent_span_id="", kind="run", name="r", started_at=0.0
    )
    classifier = SpanRecord(
        key="guardrail:1",
        span_id="2" * 16,
        parent_span_id=root.span_id,
        kind="guardrail",
        name="guardrail input",
        started_at=0.0,
        attributes={
            attr.REQUEST_MODEL: "gpt-4o-mini",
            attr.USAGE_INPUT_TOKENS: 1_000_000,
            attr.USAGE_OUTPUT_TOKENS: 0,
        },
    )
    cut_off = SpanRecord(
        key="generation:1",
        span_id="3" * 16,
        parent_span_id=root.span_id,
        kind="generation",
        name="chat gpt-4o-mini",
        started_at=0.0,
        attributes={attr.REQUEST_MODEL: "gpt-4o-mini"},  # no usage was reported
    )

    total = spans_price(records=[root, classifier, cut_off], prices={"gpt-4o-mini": MINI})

    assert total == Decimal("0.15")
    assert classifier.attributes[attr.USAGE_COST] == pytest.approx(0.15)
    assert attr.USAGE_COST not in cut_off.attributes
