"""The side-by-side table: one line per row and metric, TS | project | ratio.

The ratio is always "how many times better the project is": TS/project for figures where
lower is better (CPU, latency, memory), project/TS where higher is better (req/s). Above 1 the
project is ahead.
"""

from __future__ import annotations

from dataclasses import dataclass

# The keys of TS's and the project's (the standalone site's) figures in each row of the results.
TS, OURS = "ts", "ours"


@dataclass(frozen=True)
class Row:
    label: str
    metric: str
    ts: float | None
    ours: float | None
    higher_is_better: bool
    columns: tuple[str, str] = ("TS", "project")
    compared: bool = True  # False for context figures (the machine's load), shown without ratio


def ratio(row: Row) -> float | None:
    """How many times better the project is (None when a side is missing or zero)."""
    if not row.compared or row.ts is None or row.ours is None:
        return None
    if row.higher_is_better:
        return row.ours / row.ts if row.ts else None
    return row.ts / row.ours if row.ours else None


def _cell(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"


def format_table(rows: list[Row]) -> str:
    header = f"{'row':<44} {'metric':<24} {'TS':>9} {'project':>9} {'x better':>9}"
    lines = [header, "-" * len(header)]
    for row in rows:
        found = ratio(row)
        label = row.label if row.columns == ("TS", "project") else f"{row.label}"
        lines.append(
            f"{label:<44} {row.metric:<24} {_cell(row.ts):>9} {_cell(row.ours):>9} "
            f"{'-' if found is None else f'{found:.2f}x':>9}"
        )
    return "\n".join(lines)
