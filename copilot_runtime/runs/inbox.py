"""A run's events on their way to one watcher (the response streaming them, a follower).

Each event a run emits crosses from the task executing the run to the task of each watcher.
``asyncio.Queue`` did that with what no watcher uses (a bound, waiting writers, task
accounting), work of its own per event on the way of every token, which this class leaves
out. A watcher also takes everything that is waiting at once (``take``), and encodes it as
one chunk.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

T = TypeVar("T")


class Inbox(Generic[T]):
    """Unbounded, for one reader at a time. ``get`` and ``get_nowait`` read one item, as a
    queue's do; ``take`` reads everything waiting (at least one item)."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: list[T] = []
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: T) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def empty(self) -> bool:
        return not self._items

    def qsize(self) -> int:
        return len(self._items)

    async def _arrival(self) -> None:
        if self._waiter is not None:
            raise RuntimeError("an inbox has one reader at a time")
        waiter = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            await waiter
        finally:
            if self._waiter is waiter:  # cancelled while waiting: no one waits any more
                self._waiter = None

    async def arrival(self, *, within: float) -> None:
        """Return once an item is waiting, or after ``within`` seconds; takes nothing."""
        if self._items:
            return
        if self._waiter is not None:
            raise RuntimeError("an inbox has one reader at a time")
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(within, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if self._waiter is waiter:
                self._waiter = None

    async def take(self) -> list[T]:
        """Everything waiting, oldest first; waits for the first item if there is none."""
        while not self._items:
            await self._arrival()
        items, self._items = self._items, []
        return items

    async def get(self) -> T:
        while not self._items:
            await self._arrival()
        return self._items.pop(0)

    def get_nowait(self) -> T:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.pop(0)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
