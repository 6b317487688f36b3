"""One object per running event loop, created on first use and forgotten with its loop.

What the runs of one loop share (their heartbeat, their log writer) must not cross loops: a
worker process runs its runs on a loop of its own, and tests start a loop per test.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

Shared = TypeVar("Shared")


class PerLoop(Generic[Shared]):
    def __init__(self, make: Callable[[], Shared]) -> None:
        self._make = make
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Shared] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> Shared:
        """The running loop's one (created on first use)."""
        loop = asyncio.get_running_loop()
        shared = self._by_loop.get(loop)
        if shared is None:
            shared = self._by_loop[loop] = self._make()
        return shared
