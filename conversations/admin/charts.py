"""Small SVG charts for the admin's usage page, drawn on the server (no JavaScript build).

A time chart has a slot for every bucket of the period (an hour, a day or a week; empty ones
too), so the axis reads as time: one busy day among thirty is one bar among thirty slots, not
a bar the width of the chart. Its value axis has gridlines labelled in the figure's own format
(``money`` for cost, durations in ms or s), from 0 to a round maximum. A chart with nothing to
draw says so instead. Labels are escaped (a model name is whatever a request said).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

WIDTH = 760
_PLOT_HEIGHT = 150
_TOP = 10
_LEFT = 70  # the value labels
_RIGHT = 24  # room for the last time label
_BOTTOM = 34  # the time labels and the legend
_MAX_BAR = 28.0
_ROW_HEIGHT = 22
_LEFT_LABEL_WIDTH = 180
_X_LABELS = 7
NOTHING_YET = "Nothing yet: no runs in this period."

ValueText = Callable[[float], str]


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    color: str
    values: Sequence[float | None]  # one per bucket; None: nothing to measure there


@dataclass(frozen=True, slots=True)
class Point:
    label: str
    value: float


def count_text(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 10_000:
        return f"{value / 1_000:.0f}k"
    if value >= 1_000:
        return f"{value / 1_000:.1f}k"
    return f"{value:.0f}" if value == int(value) else f"{value:.2g}"


def ms_text(value: float) -> str:
    return f"{value / 1000:.2g} s" if value >= 1000 else f"{value:.0f} ms"


def round_top(value: float) -> float:
    """The axis's end: the smallest of 1, 2, 2.5 or 5 times a power of ten not below
    ``value``."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for factor in (1, 2, 2.5, 5, 10):
        if value <= factor * power * (1 + 1e-9):
            return factor * power
    return 10 * power


def _frame(title: str, height: int, body: str) -> SafeString:
    return format_html(
        '<figure class="ins-chart"><figcaption>{}</figcaption>'
        '<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{}" width="{}" '
        'height="{}" viewBox="0 0 {} {}">{}</svg></figure>',
        title,
        title,
        WIDTH,
        height,
        WIDTH,
        height,
        mark_safe(body),
    )


def nothing_yet(title: str) -> SafeString:
    return _frame(title, 24, f'<text class="chart-empty" x="0" y="16">{escape(NOTHING_YET)}</text>')


def time_chart(
    title: str, *, labels: Sequence[str], ticks: Sequence[str], series: Sequence[Series],
    value_text: ValueText, counts: bool = False,
) -> SafeString:  # fmt: skip
    """Bars over time: a slot per bucket (``labels`` name them in tooltips, ``ticks`` on the
    axis), the series side by side in it. ``counts``: whole numbers, so the axis is too."""
    values = [v for s in series for v in s.values if v is not None]
    if not values or max(values) <= 0:
        return nothing_yet(title)
    top = round_top(max(values))
    if counts:
        top = max(top, 2.0)  # no "0.5 runs" on the axis
    plot_width = WIDTH - _LEFT - _RIGHT
    slot = plot_width / max(1, len(labels))
    bar = min(_MAX_BAR, slot * 0.8 / len(series))
    parts = []
    for step in range(3):  # gridlines at 0, half and the top
        value = top * step / 2
        y = _TOP + _PLOT_HEIGHT * (1 - step / 2)
        parts.append(
            f'<line x1="{_LEFT}" x2="{WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ccc"/>'
            f'<text class="chart-value" x="{_LEFT - 6}" y="{y + 4:.1f}" font-size="10" '
            f'text-anchor="end">{escape(value_text(value))}</text>'
        )
    group = bar * len(series)
    for index, label in enumerate(labels):
        left = _LEFT + index * slot + (slot - group) / 2
        for offset, one in enumerate(series):
            value = one.values[index]
            if not value:
                continue
            height = max(1.0, _PLOT_HEIGHT * value / top)
            x = left + offset * bar
            tip = escape(f"{label}, {one.name}: {value_text(value)}")
            parts.append(
                f'<rect class="chart-bar" x="{x:.1f}" y="{_TOP + _PLOT_HEIGHT - height:.1f}" '
                f'width="{bar:.1f}" height="{height:.1f}" fill="{one.color}">'
                f"<title>{tip}</title></rect>"
            )
        if ticks[index]:
            parts.append(
                f'<text class="chart-tick" x="{_LEFT + (index + 0.5) * slot:.1f}" '
                f'y="{_TOP + _PLOT_HEIGHT + 14}" font-size="10" text-anchor="middle">'
                f"{escape(ticks[index])}</text>"
            )
    if len(series) > 1:
        x = float(_LEFT)
        for one in series:
            parts.append(
                f'<rect x="{x:.1f}" y="{_TOP + _PLOT_HEIGHT + 21}" width="10" height="10" '
                f'fill="{one.color}"/><text x="{x + 14:.1f}" y="{_TOP + _PLOT_HEIGHT + 30}" '
                f'font-size="10">{escape(one.name)}</text>'
            )
            x += 24 + 7 * len(one.name)
    return _frame(title, _TOP + _PLOT_HEIGHT + _BOTTOM, "".join(parts))


def axis_ticks(labels: Sequence[str]) -> list[str]:
    """About seven labels spread over the axis (first included), blanks between."""
    every = max(1, math.ceil(len(labels) / _X_LABELS))
    return [label if index % every == 0 else "" for index, label in enumerate(labels)]


def bar_chart(title: str, points: Sequence[Point], *, value_text: ValueText) -> SafeString:
    """Horizontal bars, largest first (a breakdown, e.g. by model)."""
    ordered = sorted((p for p in points if p.value > 0), key=lambda p: p.value, reverse=True)
    if not ordered:
        return nothing_yet(title)
    top = ordered[0].value
    span = WIDTH - _LEFT_LABEL_WIDTH - 90
    parts = []
    for index, point in enumerate(ordered):
        y = index * _ROW_HEIGHT
        width = max(1.0, span * point.value / top)
        parts.append(
            f'<text x="0" y="{y + 15}" font-size="11">{escape(point.label[:28])}</text>'
            f'<rect class="chart-bar" x="{_LEFT_LABEL_WIDTH}" y="{y + 4}" width="{width:.1f}" '
            f'height="14" fill="#417690"><title>{escape(point.label)}</title></rect>'
            f'<text class="chart-value" x="{_LEFT_LABEL_WIDTH + width + 6:.1f}" y="{y + 15}" '
            f'font-size="11">{escape(value_text(point.value))}</text>'
        )
    return _frame(title, len(ordered) * _ROW_HEIGHT + 4, "".join(parts))
