"""Percentiles and the summary of one measured load window."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Linear-interpolated percentile (``fraction`` in 0..1) of unsorted values; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    lower = math.floor(position)
    upper = math.ceil(position)
    if lower == upper:
        return ordered[lower]
    weight = position - lower
    return ordered[lower] * (1 - weight) + ordered[upper] * weight


@dataclass(frozen=True)
class Distribution:
    """Milliseconds: p50 / p95 / p99 / mean / max of a list of seconds."""

    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    mean_ms: float | None
    max_ms: float | None

    @classmethod
    def of_seconds(cls, values: Sequence[float]) -> Distribution:
        def ms(value: float | None) -> float | None:
            return None if value is None else round(value * 1000, 3)

        return cls(
            p50_ms=ms(percentile(values, 0.50)),
            p95_ms=ms(percentile(values, 0.95)),
            p99_ms=ms(percentile(values, 0.99)),
            mean_ms=ms(sum(values) / len(values)) if values else None,
            max_ms=ms(max(values)) if values else None,
        )


@dataclass(frozen=True)
class LoadSummary:
    """The figures of one measured window (requests completed inside it)."""

    concurrency: int
    tokens_requested: int
    window_seconds: float
    completed: int
    succeeded: int
    failed: int
    requests_per_second: float
    ttft: Distribution
    latency: Distribution
    tokens_per_request_mean: float | None
    loadgen_cpu_ms_per_request: float | None
    loadgen_cpu_percent_of_core: float
    error_samples: list[str]
    # Multipart content items per request: the tokens (inline), or coalesced deltas (celery).
    content_items_per_request_mean: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
