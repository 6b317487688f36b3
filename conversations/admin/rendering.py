"""Small text helpers for the inspector's templates (their output is escaped by the template)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any


def json_text(value: Any) -> str:
    """Indented JSON for display; anything not JSON shown as its text."""
    if value is None:
        return ""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def json_text_of_string(text: str) -> str:
    """A tool result or argument string: indented when it is JSON, else as it is."""
    try:
        return json_text(json.loads(text))
    except (TypeError, ValueError):
        return text


def cost_text(cost: Decimal | float | None) -> str:
    if cost is None:
        return "—"
    value = Decimal(str(cost))
    if value == 0:
        return "$0"
    if value < Decimal("0.01"):
        return f"${value:.6f}"
    return f"${value:.4f}"


def money(value: Decimal | float | int | None) -> str:
    """A cost in USD to its magnitude: $0, $0.000036, $0.25, $12.50, $1,234.50 (two
    significant digits below a dollar, cents above). None (nothing priced) reads $0 too, as in
    the charts; the page says which runs had no price."""
    amount = Decimal(str(value or 0))
    if amount == 0:
        return "$0"
    sign, amount = ("-", -amount) if amount < 0 else ("", amount)
    if amount >= 1:
        return f"{sign}${amount:,.2f}"
    places = max(2, -amount.adjusted() + 1)
    text = f"{amount:.{places}f}"
    whole, cents = text.split(".")
    return f"{sign}${whole}.{cents.rstrip('0').ljust(2, '0')}"


def duration_text(ms: float | None) -> str:
    if ms is None:
        return "—"
    if ms >= 60_000:
        return f"{ms / 60_000:.1f} min"
    if ms >= 1000:
        return f"{ms / 1000:.2f} s"
    return f"{ms:.0f} ms"
