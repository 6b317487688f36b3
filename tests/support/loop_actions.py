"""Server actions for the loop-control tests: one that fails or succeeds on request.

Every execution is appended to ``EXECUTIONS`` (name, arguments), so a test can tell which calls
the loop really ran and which ones a breaker or an approval held back.
"""

from __future__ import annotations

from typing import Any

EXECUTIONS: list[tuple[str, dict[str, Any]]] = []


def sometimes_fails(fail: bool, tag: str) -> str:
    """Fail (raise) when ``fail`` is true, else answer "ok (<tag>)"."""
    EXECUTIONS.append(("sometimes_fails", {"fail": fail, "tag": tag}))
    if fail:
        raise RuntimeError(f"sometimes_fails failed ({tag})")
    return f"ok ({tag})"
