"""Writes grouped per event loop: one in flight at a time, what comes meanwhile goes next.

Many requests and runs share one event loop, and each write of theirs (a turn's rows, a run's
log batch or its end) is a statement and a round trip of its own. ``Grouped`` takes them one
by one and hands them to ``write_many`` together: those submitted in the same turn of the loop,
and those that came while the previous group was in flight. An idle loop writes each at once;
a busy one writes in larger groups, not more often.

A group fails as a whole (one statement); it is then written item by item, so each submitter
learns what writing its own item raised, and the others are written.

What the runs of one loop share must not cross loops (``PerLoop``): a worker process runs its
runs on a loop of its own, and tests start a loop per test.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

Shared = TypeVar("Shared")
Item = TypeVar("Item")


class PerLoop(Generic[Shared]):
    """One object per running event loop, created on first use and forgotten with its loop."""

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


class Grouped(Generic[Item]):
    """``write_many(items)`` for the items submitted while no group is in flight; then
    ``written(items)`` for those written (what must follow their write, before their
    submitters go on)."""

    def __init__(
        self,
        write_many: Callable[[Sequence[Item]], Awaitable[None]],
        *,
        written: Callable[[list[Item]], Awaitable[None]] | None = None,
        at_once: bool = False,
    ) -> None:
        self._write_many = write_many
        self._written = written
        # An item submitted while nothing is in flight is written by its submitter at once,
        # not a turn of the loop later (what is submitted meanwhile is the next group). For
        # items that come one by one (a turn's write, whose answer waits for it); not for those
        # submitted together at one moment (the runs' log batches on their common grid).
        self._at_once = at_once
        self._pending: list[tuple[Item, asyncio.Future[None]]] = []
        self._task: asyncio.Task[Any] | None = None

    async def submit(self, item: Item) -> None:
        """Write ``item`` with the others of its group; raises what writing it alone raised."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append((item, done))
        if self._task is None and self._at_once:
            self._task = asyncio.current_task()  # in flight: later items wait for the next group
            try:
                group, self._pending = self._pending, []
                await self._write(group)
            finally:
                self._task = None
                if self._pending:
                    self._task = loop.create_task(self._drain())
        elif self._task is None:
            # Its first step comes after the other submitters of this turn of the loop.
            self._task = loop.create_task(self._drain())
        await done

    async def _drain(self) -> None:
        try:
            while self._pending:
                group, self._pending = self._pending, []
                await self._write(group)
        finally:
            self._task = None

    async def _write(self, group: list[tuple[Item, asyncio.Future[None]]]) -> None:
        try:
            errors = await self._outcomes([item for item, _ in group])
            if self._written is not None:
                await self._written(
                    [item for (item, _), error in zip(group, errors, strict=True) if error is None]
                )
            for (_, done), error in zip(group, errors, strict=True):
                if done.done():
                    continue
                if error is None:
                    done.set_result(None)
                else:
                    done.set_exception(error)
        finally:
            for _, done in group:
                if not done.done():  # cancelled (the loop is closing): no submitter must wait
                    done.cancel()

    async def _outcomes(self, items: list[Item]) -> list[BaseException | None]:
        """What writing each item raised, if anything."""
        try:
            await self._write_many(items)
            return [None] * len(items)
        except Exception as exc:
            if len(items) == 1:
                return [exc]
        errors: list[BaseException | None] = []
        for item in items:
            try:
                await self._write_many([item])
            except Exception as alone:
                errors.append(alone)
            else:
                errors.append(None)
        return errors
