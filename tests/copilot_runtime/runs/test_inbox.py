"""A run's events reach each watcher through an inbox: in order, all that waits at once."""

from __future__ import annotations

import asyncio

import pytest

from copilot_runtime.runs.inbox import Inbox


async def test_take_gives_everything_waiting_oldest_first() -> None:
    inbox: Inbox[int] = Inbox()
    for item in (1, 2, 3):
        inbox.put_nowait(item)
    assert inbox.qsize() == 3
    assert await inbox.take() == [1, 2, 3]
    assert inbox.empty()


async def test_take_waits_for_the_first_item() -> None:
    inbox: Inbox[str] = Inbox()
    reader = asyncio.create_task(inbox.take())
    await asyncio.sleep(0.01)
    assert not reader.done()
    inbox.put_nowait("a")
    inbox.put_nowait("b")  # before the reader runs: it gets both
    assert await asyncio.wait_for(reader, 1) == ["a", "b"]


async def test_get_reads_one_item_at_a_time_as_a_queue_does() -> None:
    inbox: Inbox[int | None] = Inbox()
    reader = asyncio.create_task(inbox.get())
    await asyncio.sleep(0)
    inbox.put_nowait(1)
    inbox.put_nowait(None)
    assert await asyncio.wait_for(reader, 1) == 1
    assert inbox.get_nowait() is None
    with pytest.raises(asyncio.QueueEmpty):
        inbox.get_nowait()


async def test_a_reader_that_stopped_waiting_leaves_the_inbox_usable() -> None:
    inbox: Inbox[int] = Inbox()
    reader = asyncio.create_task(inbox.take())
    await asyncio.sleep(0)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    inbox.put_nowait(7)
    assert await asyncio.wait_for(inbox.take(), 1) == [7]


async def test_two_readers_at_once_are_refused() -> None:
    inbox: Inbox[int] = Inbox()
    first = asyncio.create_task(inbox.take())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError):
        await inbox.get()
    inbox.put_nowait(1)
    assert await asyncio.wait_for(first, 1) == [1]


async def test_arrival_returns_once_an_item_waits_and_takes_nothing() -> None:
    inbox: Inbox[str] = Inbox()
    waiting = asyncio.create_task(inbox.arrival(within=10))
    await asyncio.sleep(0.01)
    assert not waiting.done()

    inbox.put_nowait("a")
    await asyncio.wait_for(waiting, 1)

    assert inbox.qsize() == 1
    await inbox.arrival(within=10)  # one is waiting already: at once
    assert await inbox.take() == ["a"]


async def test_arrival_gives_up_after_its_bound() -> None:
    inbox: Inbox[str] = Inbox()
    loop = asyncio.get_running_loop()
    began = loop.time()

    await asyncio.wait_for(inbox.arrival(within=0.05), 5)

    assert loop.time() - began >= 0.04
    assert inbox.empty()
    inbox.put_nowait("late")  # the inbox reads on as before
    assert await inbox.take() == ["late"]
