"""What the runs of an event loop write as they go, written together.

While a model streams, each run's flusher logs its new events every ``EVENT_FLUSH_MS`` (30 ms
while a worker relays the run, 250 ms inline). Written one run at a time, fifty streams on a
worker made about 1,650 statements a second, and each statement's round trip cost that
worker's one event loop more than the model's tokens did (py-spy). Flushers wake on a common
grid of their interval instead (``next_flush_at``), and the batches handed over in the same
turn of the loop, or while the previous write was in flight, go to the database as one
statement, and to the channel layer as one round trip (``announce_batches``).

A run executed where it is streamed (inline) also hands over the time of its first token
here: its log is not on the stream's way. So does every run its end (its last events, its
output messages, its spans): under load, the ends of the runs finishing while a write is in
flight share the next statement, where each was a statement and a round trip of its own (one
of the three a short turn made: its preparation's two and its end).

A statement for many runs fails for all of them: it is then retried run by run, so that one
run's bad batch (a run deleted meanwhile) fails that run's flusher alone, which keeps it and
retries it with its next write, as it does any failed write.

    await log_writer_for_loop().write(run_id=run_id, thread_pk=thread_pk, progress=progress)
"""

from __future__ import annotations

import asyncio
import math
from typing import NamedTuple

from conversations.store import turn_store
from conversations.store.types import Progress, RunProgress
from copilot_runtime.engine.per_loop import PerLoop
from copilot_runtime.engine.relay import announce_batches


def next_flush_at(*, last_flush: float, interval: float) -> float:
    """The first multiple of ``interval`` after ``last_flush`` (on the event loop's clock): at
    most one write per interval for each run, at the very same moments for all of them."""
    return (math.floor(last_flush / interval) + 1) * interval


class _Handover(NamedTuple):
    entry: RunProgress
    done: asyncio.Future[None]


class LoopLogWriter:
    """One write in flight at a time: what is handed over meanwhile (the flushers woken in the
    same turn of the loop, and those that came while the database answered) goes next, in one
    statement. A busy loop therefore writes in larger groups, not more often."""

    def __init__(self) -> None:
        self._pending: list[_Handover] = []
        self._task: asyncio.Task[None] | None = None

    async def write(self, *, run_id: str, thread_pk: int | None, progress: Progress) -> None:
        """Write ``progress`` of ``run_id`` (its next log entries, and whatever else it
        carries) with what the other runs hand over meanwhile, then announce its events;
        raises what writing it alone raised. One write per run at a time (its flusher's)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._pending.append(_Handover(RunProgress(run_id, thread_pk, progress), done))
        if self._task is None:
            # Its first step comes after the flushers woken in this turn of the loop.
            self._task = loop.create_task(self._drain())
        await done

    async def _drain(self) -> None:
        try:
            while self._pending:
                batches, self._pending = self._pending, []
                await _write(batches)
        finally:
            self._task = None


async def _write(batches: list[_Handover]) -> None:
    """Log the batches in one statement (run by run if that fails), announce those logged in
    one round trip, then let their flushers go on."""
    try:
        outcomes = await _record(batches)
        # Logged first, announced second: a follower can always catch up from the log.
        await announce_batches(
            [
                (batch.entry.run_id, batch.entry.progress.events)
                for batch, error in zip(batches, outcomes, strict=True)
                if error is None
            ]
        )
        for batch, error in zip(batches, outcomes, strict=True):
            _settle(batch.done, error)
    finally:
        for batch in batches:
            if not batch.done.done():  # cancelled (the loop is closing): the flusher must not wait
                batch.done.cancel()


async def _store(batches: list[_Handover]) -> None:
    await turn_store().record_many(entries=[batch.entry for batch in batches])


async def _record(batches: list[_Handover]) -> list[BaseException | None]:
    """What logging each batch raised, if anything."""
    try:
        await _store(batches)
        return [None] * len(batches)
    except Exception as exc:
        if len(batches) == 1:
            return [exc]
    outcomes: list[BaseException | None] = []
    for batch in batches:
        try:
            await _store([batch])
        except Exception as alone:
            outcomes.append(alone)
        else:
            outcomes.append(None)
    return outcomes


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


_writers: PerLoop[LoopLogWriter] = PerLoop(LoopLogWriter)


def log_writer_for_loop() -> LoopLogWriter:
    """The log writer of the running event loop (created on first use)."""
    return _writers.get()
