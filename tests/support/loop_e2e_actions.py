"""Server actions for the loop-control end-to-end tests (tests/e2e/test_loop_control.py).

Each action appends one line per execution to the file named by ``LOOP_ACTIONS_LOG`` (when it
is set), so a test can count how often the served process really ran an action: a call the
circuit breaker or the approval gate held back leaves no line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from copilot_runtime.engine.actions import server_action

EXECUTION_LOG_ENV = "LOOP_ACTIONS_LOG"


def record_execution(action: str, **arguments: Any) -> None:
    """One JSON line ``{"action", "arguments"}`` in the execution log."""
    log_path = os.environ.get(EXECUTION_LOG_ENV)
    if not log_path:
        return
    line = json.dumps({"action": action, "arguments": arguments}, sort_keys=True)
    with Path(log_path).open("a", encoding="utf-8") as log:
        log.write(line + "\n")


def read_executions(log_path: Path) -> list[dict[str, Any]]:
    """The executions recorded so far, oldest first (none when the file does not exist)."""
    if not log_path.exists():
        return []
    return [json.loads(line) for line in log_path.read_text(encoding="utf-8").splitlines()]


@server_action(
    name="flakyLookup",
    description="Look a key up; fails when asked to.",
    parameters={
        "type": "object",
        "properties": {"key": {"type": "string"}, "fail": {"type": "boolean"}},
        "required": ["key"],
    },
)
def flaky_lookup(key: str, fail: bool = True) -> str:
    record_execution("flakyLookup", key=key, fail=fail)
    if fail:
        raise RuntimeError(f"lookup of {key!r} failed")
    return f"found {key}"


@server_action(
    name="ping",
    description="Answer pong; takes no arguments.",
    parameters={"type": "object", "properties": {}},
)
def ping() -> str:
    record_execution("ping")
    return "pong"


@server_action(
    name="serverAdd",
    description="Add two numbers on the server (needs approval in the approval tests).",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)
def recorded_add(a: float, b: float) -> dict[str, float]:
    record_execution("serverAdd", a=a, b=b)
    return {"sum": a + b}
