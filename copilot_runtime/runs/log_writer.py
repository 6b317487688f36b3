"""What the runs of an event loop write as they go, written together.

While a model streams, each run's flusher logs its new events every ``EVENT_FLUSH_MS`` (30 ms
while a worker relays the run, 250 ms inline). Written one run at a time, fifty streams on a
worker made a statement each per interval, and each statement's round trip cost that worker's
one event loop more than the model's tokens did. Flushers wake on a common
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

import math
from collections.abc import Sequence
from typing import NamedTuple

from conversations.store import turn_store
from conversations.store.grouped import Grouped, PerLoop
from conversations.store.types import Progress, RunProgress
from copilot_runtime.runs.relay import announce_batches


def next_flush_at(*, last_flush: float, interval: float) -> float:
    """The first multiple of ``interval`` after ``last_flush`` (on the event loop's clock): at
    most one write per interval for each run, at the very same moments for all of them."""
    return (math.floor(last_flush / interval) + 1) * interval


class _Handed(NamedTuple):
    entry: RunProgress
    # How many of its events were announced already (a relayed run's first token).
    told: int


async def _record(handed: Sequence[_Handed]) -> None:
    await turn_store().record_many(entries=[item.entry for item in handed])


async def _announce(handed: list[_Handed]) -> None:
    # Logged first, announced second: a follower can always catch up from the log.
    await announce_batches(
        [(item.entry.run_id, item.entry.progress.events[item.told :]) for item in handed]
    )


class LoopLogWriter:
    """One write in flight at a time: what is handed over meanwhile (the flushers woken in the
    same turn of the loop, and those that came while the database answered) goes next, in one
    statement, and its events in one announcement (conversations/store/grouped.py)."""

    def __init__(self) -> None:
        self._grouped: Grouped[_Handed] = Grouped(_record, written=_announce)

    async def write(
        self, *, run_id: str, thread_pk: int | None, progress: Progress, told: int = 0
    ) -> None:
        """Write ``progress`` of ``run_id`` (its next log entries, and whatever else it
        carries) with what the other runs hand over meanwhile, then announce its events but
        the first ``told`` (announced already); raises what writing it alone raised. One
        write per run at a time (its flusher's)."""
        await self._grouped.submit(_Handed(RunProgress(run_id, thread_pk, progress), told))


_writers: PerLoop[LoopLogWriter] = PerLoop(LoopLogWriter)


def log_writer_for_loop() -> LoopLogWriter:
    """The log writer of the running event loop (created on first use)."""
    return _writers.get()
