"""Writes grouped per event loop: one group in flight, what comes meanwhile goes next."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from conversations.store.grouped import Grouped, PerLoop


class Database:
    """Records each group written; refuses any group holding a refused item."""

    def __init__(self) -> None:
        self.groups: list[list[str]] = []
        self.refused: set[str] = set()
        self.hold: asyncio.Event | None = None
        self.written: list[list[str]] = []

    async def write_many(self, items: Sequence[str]) -> None:
        self.groups.append(list(items))
        if self.hold is not None and len(self.groups) == 1:
            await self.hold.wait()
        if self.refused & set(items):
            raise ValueError(f"refused {sorted(self.refused & set(items))}")

    async def after(self, items: list[str]) -> None:
        self.written.append(items)


async def test_items_submitted_in_one_turn_of_the_loop_are_one_group() -> None:
    db = Database()
    grouped = Grouped(db.write_many, written=db.after)
    await asyncio.gather(*(grouped.submit(item) for item in "abc"))
    assert db.groups == [["a", "b", "c"]]
    assert db.written == [["a", "b", "c"]]


async def submitted_during_a_held_group(db: Database, grouped: Grouped[str]) -> list[object]:
    """ "a" submitted and its group held in flight; "b", "c" and "d" submitted meanwhile; then
    the hold released. What each submission returned or raised."""
    db.hold = asyncio.Event()
    first = asyncio.create_task(grouped.submit("a"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert db.groups == [["a"]]  # under way
    later = [asyncio.create_task(grouped.submit(item)) for item in "bcd"]
    await asyncio.sleep(0.02)
    assert db.groups == [["a"]]  # one group in flight at a time
    db.hold.set()
    return await asyncio.gather(first, *later, return_exceptions=True)


async def test_items_submitted_while_a_group_is_in_flight_are_the_next_group() -> None:
    db = Database()
    results = await submitted_during_a_held_group(db, Grouped(db.write_many))
    assert results == [None] * 4
    assert db.groups == [["a"], ["b", "c", "d"]]


async def test_a_refused_item_fails_its_own_submitter_only() -> None:
    db = Database()
    db.refused = {"b"}
    grouped = Grouped(db.write_many, written=db.after)
    results = await asyncio.gather(
        *(grouped.submit(item) for item in "abc"), return_exceptions=True
    )
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], ValueError)
    # The group failed whole, then each item was written on its own; only those written
    # are handed to what follows a write.
    assert db.groups == [["a", "b", "c"], ["a"], ["b"], ["c"]]
    assert db.written == [["a", "c"]]


async def test_each_event_loop_has_its_own() -> None:
    per_loop: PerLoop[object] = PerLoop(object)
    mine = per_loop.get()
    assert per_loop.get() is mine
    other = await asyncio.to_thread(lambda: asyncio.run(_get(per_loop)))
    assert other is not mine


async def _get(per_loop: PerLoop[object]) -> object:
    return per_loop.get()


@pytest.mark.parametrize("count", [1, 5])
async def test_an_idle_loop_writes_each_item_at_once(count: int) -> None:
    db = Database()
    grouped = Grouped(db.write_many)
    for n in range(count):
        await grouped.submit(str(n))
    assert db.groups == [[str(n)] for n in range(count)]


async def test_at_once_an_item_submitted_while_idle_is_written_by_its_submitter() -> None:
    db = Database()
    db.hold = asyncio.Event()
    grouped = Grouped(db.write_many, at_once=True)
    first = asyncio.get_running_loop().create_task(grouped.submit("a"))
    await asyncio.sleep(0)  # one step of the submitter: its write is under way already
    assert db.groups == [["a"]]
    db.hold.set()
    await first
    db.groups.clear()
    results = await submitted_during_a_held_group(db, grouped)
    assert results == [None] * 4
    assert db.groups == [["a"], ["b", "c", "d"]]


async def test_at_once_a_refused_item_fails_its_own_submitter_only() -> None:
    db = Database()
    db.refused = {"c"}
    results = await submitted_during_a_held_group(db, Grouped(db.write_many, at_once=True))
    assert [isinstance(result, ValueError) for result in results] == [False, False, True, False]
    assert db.groups == [["a"], ["b", "c", "d"], ["b"], ["c"], ["d"]]
