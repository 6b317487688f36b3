"""An admin edit of a guardrail rule or a model price applies at once in the process that made
it: saving or deleting one empties that process's cached copy (copilot_runtime/receivers.py)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from copilot_runtime.guardrails import rules
from copilot_runtime.models import GuardrailMatch, GuardrailRule, GuardrailRuleKind, ModelPrice
from copilot_runtime.tracing import cost

pytestmark = pytest.mark.django_db


def test_saving_and_deleting_a_rule_empties_the_rules_cache() -> None:
    rules._rules_cache["default"] = (0.0, [])
    rule = GuardrailRule.objects.create(
        name="no weather", kind=GuardrailRuleKind.DENY, match=GuardrailMatch.TOPIC, text="weather"
    )
    assert rules._rules_cache == {}
    rules._rules_cache["default"] = (0.0, [])
    rule.delete()
    assert rules._rules_cache == {}


def test_saving_and_deleting_a_price_empties_the_prices_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cost, "_prices_cache", (0.0, {}))
    price = ModelPrice.objects.create(
        model="test-model", input_per_million=Decimal("1"), output_per_million=Decimal("2")
    )
    assert cost._prices_cache is None
    monkeypatch.setattr(cost, "_prices_cache", (0.0, {}))
    price.delete()
    assert cost._prices_cache is None
