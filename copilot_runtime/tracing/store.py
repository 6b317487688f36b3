"""Writing a run's spans and cost to Postgres, once, at the end of the run."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.db import transaction

from conversations.models import Run, Span
from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing.cost import Price, price_for_model, prices_load, usage_cost
from copilot_runtime.tracing.records import SpanRecord
from copilot_runtime.tracing.signals import KIND_GENERATION, KIND_GUARDRAIL

SPAN_BATCH_SIZE = 500


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
        )
        attributes[attr.USAGE_COST] = float(cost)
        total = cost if total is None else total + cost
    if total is not None:
        for record in records:
            if not record.parent_span_id:
                record.attributes[attr.USAGE_COST] = float(total)
    return total


def when(seconds: float | None) -> dt.datetime | None:
    if seconds is None:
        return None
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def trace_store(
    *, run_id: str, trace_id: str, records: list[SpanRecord], persist_spans: bool
) -> Decimal | None:
    """Price the run's model calls, store its spans (when ``persist_spans``) and its cost."""
    cost = spans_price(records=records, prices=prices_load())
    with transaction.atomic():
        if persist_spans and records:
            Span.objects.bulk_create(
                [
                    Span(
                        trace_id=trace_id,
                        span_id=record.span_id,
                        parent_span_id=record.parent_span_id,
                        run_id=run_id,
                        kind=record.kind,
                        name=record.name[:255],
                        input=record.input,
                        output=record.output,
                        attributes=record.attributes,
                        is_error=record.is_error,
                        is_complete=record.is_complete,
                        started_at=when(record.started_at),
                        ended_at=when(record.ended_at),
                    )
                    for record in records
                ],
                batch_size=SPAN_BATCH_SIZE,
            )
        if cost is not None:
            Run.objects.filter(pk=run_id).update(cost=cost)
    return cost
