"""Waiting on a condition instead of sleeping: ``await eventually(probe, what=...)``.

A test that sleeps "long enough" and then asserts is slow when the machine is fast and flaky
when it is slow (a loaded CI box, a parallel run). Poll the condition instead, with a deadline
that only a broken product reaches. (``tests/support/generate_e2e.py``'s ``wait_for`` is the
same for code that cannot await.)
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], T | Awaitable[T]],
    *,
    what: str,
    within: float = 10.0,
    interval: float = 0.005,
) -> T:
    """Poll ``probe`` (plain or async) until it returns something truthy, and return that;
    fail naming ``what`` once ``within`` seconds have passed."""
    deadline = time.monotonic() + within
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {within:.1f}s waiting for {what}")
        await asyncio.sleep(interval)
