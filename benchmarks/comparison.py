"""Inline and Celery side by side: the same figures per configuration, and the worker hop.

The worker hop is what executing the run on a worker adds to the time to first token: the
celery shape's TTFT p50 minus the inline shape's, for one client x 200 tokens (no queueing, so
the difference is the hop itself: enqueue, the worker taking the task and loading the run,
logging the first batch and relaying it through Redis to daphne).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

INLINE = "inline"
CELERY = "celery"
HOP_CONFIGURATION = "1x200"
# The aim for the hop at one client.
HOP_AIM_MS = 5.0

Figure = Callable[[dict[str, Any]], float | None]


def _nested(*keys: str) -> Figure:
    def read(result: dict[str, Any]) -> float | None:
        value: Any = result
        for key in keys:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value if isinstance(value, int | float) else None

    return read


def _runtime_cpu(result: dict[str, Any]) -> float | None:
    """What the runtime costs per request: daphne, plus the worker when there is one."""
    combined = result.get("runtime_cpu_ms_per_request")
    return combined if combined is not None else result.get("server_cpu_ms_per_request")


@dataclass(frozen=True)
class Row:
    label: str
    unit: str
    read: Figure
    digits: int = 1


ROWS = (
    Row("req/s", "", _nested("requests_per_second")),
    Row("TTFT p50", "ms", _nested("ttft", "p50_ms")),
    Row("TTFT p95", "ms", _nested("ttft", "p95_ms")),
    Row("latency p50", "ms", _nested("latency", "p50_ms")),
    Row("latency p95", "ms", _nested("latency", "p95_ms")),
    Row("daphne CPU", "ms/req", _nested("server_cpu_ms_per_request"), 2),
    Row("worker CPU", "ms/req", _nested("worker_cpu_ms_per_request"), 2),
    Row("daphne+worker CPU", "ms/req", _runtime_cpu, 2),
    Row("Redis CPU", "ms/req", _nested("redis_cpu_ms_per_request"), 2),
    Row("PostgreSQL CPU", "ms/req", _nested("postgres_cpu_ms_per_request"), 2),
    Row("pg xact", "per req", _nested("postgres_per_request", "transactions"), 2),
    Row("daphne peak RSS", "MiB", _nested("server_peak_rss_mib")),
    Row("worker peak RSS", "MiB", _nested("worker_peak_rss_mib")),
    Row("worker PSS after", "MiB", _nested("worker_pss_mib_after")),
    Row("failed", "", _nested("failed"), 0),
    Row("others", "% core", _nested("foreign_cpu_percent_of_core")),
)


def _by_executor(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{configuration: {executor: result}}`` (results without an executor are inline)."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for result in results:
        table.setdefault(result["name"], {})[result.get("executor", INLINE)] = result
    return table


def _difference(celery: float | None, inline: float | None) -> float | None:
    if celery is None or inline is None:
        return None
    return round(celery - inline, 3)


def worker_hop(results: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The TTFT the worker adds at one client (celery minus inline, p50 and p95)."""
    pair = _by_executor(results).get(HOP_CONFIGURATION, {})
    if INLINE not in pair or CELERY not in pair:
        return None
    added_p50 = _difference(pair[CELERY]["ttft"]["p50_ms"], pair[INLINE]["ttft"]["p50_ms"])
    return {
        "configuration": HOP_CONFIGURATION,
        "ttft_p50_added_ms": added_p50,
        "ttft_p95_added_ms": _difference(
            pair[CELERY]["ttft"]["p95_ms"], pair[INLINE]["ttft"]["p95_ms"]
        ),
        "latency_p50_added_ms": _difference(
            pair[CELERY]["latency"]["p50_ms"], pair[INLINE]["latency"]["p50_ms"]
        ),
        "aim_ms": HOP_AIM_MS,
        "within_aim": None if added_p50 is None else added_p50 < HOP_AIM_MS,
    }


def side_by_side(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per configuration measured with both executors: each figure inline, celery and the
    difference; plus the worker hop."""
    configurations = {}
    for name, pair in _by_executor(results).items():
        if INLINE not in pair or CELERY not in pair:
            continue
        configurations[name] = {
            row.label: {
                INLINE: row.read(pair[INLINE]),
                CELERY: row.read(pair[CELERY]),
                "celery_minus_inline": _difference(row.read(pair[CELERY]), row.read(pair[INLINE])),
            }
            for row in ROWS
        }
    return {"configurations": configurations, "worker_hop": worker_hop(results)}


def _fmt(value: float | None, digits: int) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if digits else str(round(value))


def render(comparison: dict[str, Any]) -> str:
    """A text table per configuration (figure | inline | celery | celery - inline)."""
    lines: list[str] = []
    digits = {row.label: row.digits for row in ROWS}
    units = {row.label: row.unit for row in ROWS}
    for name, figures in comparison["configurations"].items():
        lines.append(f"{name}: {'':<24} {'inline':>9} {'celery':>9} {'celery-inline':>14}")
        for label, values in figures.items():
            shown = f"{label} ({units[label]})" if units[label] else label
            lines.append(
                f"  {shown:<30} {_fmt(values[INLINE], digits[label]):>9} "
                f"{_fmt(values[CELERY], digits[label]):>9} "
                f"{_fmt(values['celery_minus_inline'], digits[label]):>14}"
            )
        lines.append("")
    hop = comparison.get("worker_hop")
    if hop is not None and hop["ttft_p50_added_ms"] is not None:
        verdict = "within" if hop["within_aim"] else "ABOVE"
        lines.append(
            f"worker hop ({hop['configuration']}): TTFT p50 {hop['ttft_p50_added_ms']:+.1f} ms, "
            f"p95 {hop['ttft_p95_added_ms']:+.1f} ms, latency p50 "
            f"{hop['latency_p50_added_ms']:+.1f} ms ({verdict} the {hop['aim_ms']:g} ms aim "
            "at p50)"
        )
    return "\n".join(lines).rstrip()
