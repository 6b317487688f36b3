"""Circuit breakers for a turn's tool loop.

Two layers: a soft one returned to the model as the tool result (a call that keeps failing
with the same arguments is not executed again; the model is told to stop and answer in text),
and a hard one that ends the run with a stable code the UI can act on (the model keeps calling
tools with empty arguments: its output was probably truncated). Counters live in the turn's
objects, so they never leak between runs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import orjson

EMPTY_TOOL_CALLS_CODE = "circuit_breaker_empty_tool_calls"
EMPTY_TOOL_CALLS_MESSAGE = (
    "The assistant kept calling tools without any arguments ({count} times in a row), so the "
    "run was stopped. The request was probably too large for a single tool call: split it into "
    "smaller parts and try again."
)


def failure_key(name: str, raw_arguments: str) -> str:
    """The action's name and its arguments as JSON with sorted keys (key order is noise)."""
    try:
        arguments = orjson.loads(raw_arguments) if raw_arguments.strip() else {}
        canonical = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS, default=str).decode()
    except orjson.JSONDecodeError:
        canonical = raw_arguments.strip()
    return f"{name}:{canonical}"


def stop_message(name: str, count: int) -> str:
    return (
        f"STOP: the action '{name}' failed {count} times in a row with these same arguments. "
        "Do not call it again with the same arguments. Answer the user in text instead, "
        "explaining what could not be done."
    )


@dataclass
class ToolBreaker:
    threshold: int = 3
    _failures: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def tripped(self, name: str, raw_arguments: str) -> int:
        """The failure count when the call must not run, else 0."""
        count = self._failures.get(failure_key(name, raw_arguments), 0)
        return count if count >= self.threshold else 0

    def record(self, name: str, raw_arguments: str, *, failed: bool) -> None:
        if failed:
            self._failures[failure_key(name, raw_arguments)] += 1
            return
        # Any success frees the action, whatever the arguments.
        prefix = f"{name}:"
        for key in [key for key in self._failures if key.startswith(prefix)]:
            del self._failures[key]


def arguments_are_empty(raw_arguments: str) -> bool:
    stripped = raw_arguments.strip()
    if not stripped:
        return True
    try:
        return orjson.loads(stripped) in ({}, None, "")
    except orjson.JSONDecodeError:
        return False


@dataclass
class EmptyCallsBreaker:
    threshold: int = 6
    consecutive: int = 0

    def observe(self, arguments: list[str]) -> bool:
        """Count an assistant turn; True when the breaker trips."""
        if arguments and all(arguments_are_empty(raw) for raw in arguments):
            self.consecutive += 1
        else:
            self.consecutive = 0
        return self.consecutive >= self.threshold
