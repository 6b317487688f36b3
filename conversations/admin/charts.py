"""Small SVG charts for the admin's usage page, drawn on the server (no JavaScript build).

A chart is a list of (label, value) points: vertical bars for a series over days, horizontal
bars for a breakdown by model, a line for a measure over time. Labels are escaped (a model
name is whatever a request said); values are plain numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

_WIDTH = 640
_BAR_AREA_HEIGHT = 160
_LABEL_HEIGHT = 36
_ROW_HEIGHT = 22
_LEFT_LABEL_WIDTH = 180
_COLOR = "#417690"  # the admin's own header blue


@dataclass(frozen=True, slots=True)
class Point:
    label: str
    value: float


def _number(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1_000:
        return f"{value / 1_000:.1f}k"
    if value and value < 1:
        return f"{value:.4f}".rstrip("0")
    return f"{value:g}"


def _frame(title: str, height: int, body: str) -> SafeString:
    return format_html(
        '<figure class="ins-chart"><figcaption>{}</figcaption>'
        '<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{}" width="{}" '
        'height="{}" viewBox="0 0 {} {}">{}</svg></figure>',
        title,
        title,
        _WIDTH,
        height,
        _WIDTH,
        height,
        mark_safe(body),
    )


def column_chart(title: str, points: Sequence[Point], *, unit: str = "") -> SafeString:
    """Vertical bars, oldest first (a series over days)."""
    if not points:
        return _frame(title, 24, f'<text x="0" y="16">{escape("No runs in this period.")}</text>')
    top = max(point.value for point in points) or 1.0
    slot = _WIDTH / len(points)
    bar = max(2.0, slot * 0.7)
    parts = []
    for index, point in enumerate(points):
        height = _BAR_AREA_HEIGHT * point.value / top
        x = index * slot + (slot - bar) / 2
        y = _BAR_AREA_HEIGHT - height
        tip = escape(f"{point.label}: {_number(point.value)}{unit}")
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{height:.1f}" '
            f'fill="{_COLOR}"><title>{tip}</title></rect>'
        )
        if len(points) <= 14 or index % max(1, len(points) // 7) == 0:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{_BAR_AREA_HEIGHT + 14}" font-size="10" '
                f'text-anchor="middle">{escape(point.label[-5:])}</text>'
            )
    parts.append(
        f'<text x="0" y="{_BAR_AREA_HEIGHT + 30}" font-size="10">max '
        f"{escape(_number(top))}{escape(unit)}</text>"
    )
    return _frame(title, _BAR_AREA_HEIGHT + _LABEL_HEIGHT, "".join(parts))


def bar_chart(title: str, points: Sequence[Point], *, unit: str = "") -> SafeString:
    """Horizontal bars, largest first (a breakdown, e.g. by model)."""
    if not points:
        return _frame(title, 24, f'<text x="0" y="16">{escape("No runs in this period.")}</text>')
    ordered = sorted(points, key=lambda point: point.value, reverse=True)
    top = ordered[0].value or 1.0
    span = _WIDTH - _LEFT_LABEL_WIDTH - 80
    parts = []
    for index, point in enumerate(ordered):
        y = index * _ROW_HEIGHT
        width = span * point.value / top
        parts.append(
            f'<text x="0" y="{y + 15}" font-size="11">{escape(point.label[:28])}</text>'
            f'<rect x="{_LEFT_LABEL_WIDTH}" y="{y + 4}" width="{width:.1f}" height="14" '
            f'fill="{_COLOR}"><title>{escape(point.label)}</title></rect>'
            f'<text x="{_LEFT_LABEL_WIDTH + width + 6:.1f}" y="{y + 15}" font-size="11">'
            f"{escape(_number(point.value))}{escape(unit)}</text>"
        )
    return _frame(title, len(ordered) * _ROW_HEIGHT + 4, "".join(parts))


def line_chart(title: str, points: Sequence[Point], *, unit: str = "") -> SafeString:
    """A line through the points, oldest first, with a dot per point."""
    if not points:
        return _frame(title, 24, f'<text x="0" y="16">{escape("No runs in this period.")}</text>')
    top = max(point.value for point in points) or 1.0
    step = _WIDTH / max(1, len(points) - 1) if len(points) > 1 else 0.0
    coords = [
        (
            index * step if len(points) > 1 else _WIDTH / 2,
            _BAR_AREA_HEIGHT * (1 - point.value / top) + 4,
        )
        for index, point in enumerate(points)
    ]
    parts = [
        '<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>'.format(
            _COLOR, " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        )
    ]
    for (x, y), point in zip(coords, points, strict=True):
        tip = escape(f"{point.label}: {_number(point.value)}{unit}")
        parts.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{_COLOR}"><title>{tip}</title></circle>'
        )
    parts.append(
        f'<text x="0" y="{_BAR_AREA_HEIGHT + 24}" font-size="10">max '
        f"{escape(_number(top))}{escape(unit)}; {escape(points[0].label)} to "
        f"{escape(points[-1].label)}</text>"
    )
    return _frame(title, _BAR_AREA_HEIGHT + _LABEL_HEIGHT, "".join(parts))


def usage_charts(
    *, by_day: Sequence[Any], by_model: Sequence[Any], ttft: Sequence[tuple[Any, float]]
) -> list[SafeString]:
    """The usage page's charts: tokens and cost per day and per model, and TTFT per day.
    ``by_day`` comes newest first (as the table shows it); the charts read oldest first."""
    days = list(reversed(by_day))
    return [
        column_chart(
            "Tokens per day",
            [Point(row.label, row.input_tokens + row.output_tokens) for row in days],
            unit=" tokens",
        ),
        column_chart(
            "Cost per day (USD)", [Point(row.label, float(row.cost or 0)) for row in days]
        ),
        bar_chart(
            "Tokens per model",
            [Point(row.label, row.input_tokens + row.output_tokens) for row in by_model],
            unit=" tokens",
        ),
        bar_chart(
            "Cost per model (USD)", [Point(row.label, float(row.cost or 0)) for row in by_model]
        ),
        line_chart(
            "Time to first token, mean per day (ms)",
            [Point(day.isoformat(), value) for day, value in ttft],
            unit=" ms",
        ),
    ]
