"""Server actions the tests register through COPILOT_RUNTIME_ACTIONS."""

from __future__ import annotations

import asyncio

from copilot_runtime.engine.actions import server_action


@server_action(
    name="serverAdd",
    description="Add two numbers on the server.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
)
def server_add(a: float, b: float) -> dict[str, float]:
    return {"sum": a + b}


async def lookup_weather(city: str) -> str:
    """Look up the weather of a city (async action)."""
    await asyncio.sleep(0)
    return f"Sunny in {city}"


def always_fails(reason: str = "boom") -> str:
    """An action that always raises."""
    raise RuntimeError(f"the action failed: {reason}")
