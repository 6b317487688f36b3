"""Writing a run's events to its log off the streaming path, in small batches.

Events are published at once and written by the flusher every ``EVENT_FLUSH_MS`` (on a grid
all of an event loop's runs share, so their batches go out as one statement). When followers
elsewhere read the run from its log, its first token is announced to them at once and written
with the next batch. A write in progress is never cancelled: a batch taken from the recorder
must reach the database, or the log would have a hole.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from conversations.services.runs import RunOutcome
from conversations.store import turn_store
from conversations.store.types import (
    PreparedTurn,
    Progress,
    RunStart,
    SpanWrite,
    turn_committed,
)
from copilot_runtime.runs.claim import FoldedClaim
from copilot_runtime.runs.log_writer import log_writer_for_loop, next_flush_at
from copilot_runtime.runs.recorder import RunRecorder
from copilot_runtime.runs.relay import announce_batch

logger = logging.getLogger(__name__)


class Flusher:
    """Writes the recorder's batches one at a time, off the streaming path.

    A write in progress is never cancelled: a batch taken from the recorder must reach the
    database, or the log would have a hole.
    """

    def __init__(
        self,
        recorder: RunRecorder,
        interval: float,
        prepared: PreparedTurn | None,
        *,
        first_token_at_once: bool = True,
        claim: FoldedClaim | None = None,
    ) -> None:
        self._recorder = recorder
        # Taken with the run's first announcement (its first token), or before its first write.
        self._claim = claim
        self._first_token_at_once = first_token_at_once
        self._thread_pk = prepared.thread_pk if prepared is not None else None
        self._next_position = prepared.next_position if prepared is not None else None
        # A run started while its turn's write was in flight writes nothing before that
        # write commits (its rows refer to the run's), and nothing at all if it failed.
        self._stored = prepared.stored if prepared is not None else None
        self.unstored = False
        self._store = turn_store()
        self._interval = interval
        self._outcome: RunOutcome | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # The writing task starts at the first point of the grid after the run's first event
        # (or at once for a relayed first token). A run that ends before it never needs one:
        # close() writes everything (most runs against a fast model).
        self._start_timer: asyncio.TimerHandle | None = None
        self._closing = False
        self._unwritten: list[Progress] = []
        # A relayed run's first batch with a token: announced at once, written with the
        # run's next write (see _write).
        self._told: Progress | None = None
        # A run claimed outside the database (runs/claim_redis.py): its start, recorded with its
        # first write.
        self._run_start: RunStart | None = None
        # Cuts a wait for the grid short: the run's end, or (relayed) its first token.
        self._hurry = asyncio.Event()
        # The first batch waits for the next point of the grid too (at most an interval). On
        # the event loop's clock, the flush timers' clock.
        self._last_flush = asyncio.get_running_loop().time()

    def record_start(self, start: RunStart) -> None:
        """Record the run's start (pending -> running) with its first write."""
        self._run_start = start

    def poke(self) -> None:
        first_token = self._first_token_at_once and self._recorder.first_token_pending
        if self._task is None:
            if first_token:
                self._start()
            elif self._start_timer is None:
                loop = asyncio.get_running_loop()
                due = next_flush_at(last_flush=self._last_flush, interval=self._interval)
                self._start_timer = loop.call_at(due, self._start)
        self._wake.set()
        if first_token:
            self._hurry.set()

    def _start(self) -> None:
        if self._start_timer is not None:
            self._start_timer.cancel()
            self._start_timer = None
        if self._task is None and not self._closing:
            self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            first_token = self._first_token_at_once and self._recorder.first_token_pending
            if not (self._closing or first_token):
                # Coalesce: at most one write per interval, except for the first token, on the
                # grid all the loop's runs share: their timers are due at the very same loop
                # time, so they wake in one turn of the loop and their batches go out as one
                # statement. The run's end cuts the wait short: close() writes what is left.
                # Relayed, so does the first token: what the run emitted before the model
                # answered goes out with it, in one write and one announcement, instead of a
                # write the first token would then queue behind.
                due = next_flush_at(last_flush=self._last_flush, interval=self._interval)
                if due > asyncio.get_running_loop().time():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout_at(due):
                            await self._hurry.wait()
            if self._closing:
                return
            self._hurry.clear()
            try:
                await self._write()
            except Exception:
                # Kept, and retried with the next batch (a database that hiccuped); the run
                # goes on streaming meanwhile.
                logger.warning(
                    "writing a batch of run %s failed; retrying with the next one",
                    self._recorder.run_id,
                    exc_info=True,
                )

    async def _write(
        self, outcome: RunOutcome | None = None, trace: SpanWrite | None = None
    ) -> None:
        if not self._recorder.has_pending and outcome is None and self._told is None:
            return
        if (
            self._stored is not None
            and not self._claims_announcing(outcome)
            and not await self._claimed()
        ):
            return
        if outcome is None and self._closing:
            # The run ended while this write waited for its turn's write: close() takes
            # everything, the run's end events with its status.
            return
        batch = self._recorder.take_batch()
        first_position = self._next_position
        if first_position is not None:
            self._next_position = first_position + len(batch.messages)
        self._last_flush = asyncio.get_running_loop().time()
        progress = Progress(
            events=batch.events,
            messages=batch.messages,
            agent_states=batch.agent_states,
            first_token_at=batch.first_token_at,
            outcome=outcome,
            interrupted=self._recorder.interrupted,
            first_position=first_position,
            trace=trace,
            start=self._run_start,
        )
        self._run_start = None  # this write records it now (or, failing, the one retrying it)
        told = 0
        if self._told is not None:
            told = len(self._told.events)
            progress = _joined(self._told, progress)
            self._told = None
        # Earlier batches whose write failed go first, so the log stays in order; this one
        # waits behind them if they fail again (taken from the recorder, it is only here).
        try:
            while self._unwritten:
                await self._store.record(
                    run_id=self._recorder.run_id,
                    thread_pk=self._thread_pk,
                    progress=self._unwritten[0],
                )
                await announce_batch(self._recorder.run_id, self._unwritten.pop(0).events)
        except Exception:
            if outcome is None:
                self._unwritten.append(progress)
            raise
        # Relayed, the first token is announced at once, on its own: queued behind the loop's
        # write in flight, it would reach the followers that much later. Everything else
        # (inline, the first token's time too) is written, then announced, with what the
        # loop's other runs hand over meanwhile.
        alone = self._first_token_at_once and batch.first_token_at is not None
        if (
            self._stored is not None
            and not (alone and outcome is None)
            and not await self._claimed()
        ):
            return  # nothing of the run is stored: the batch goes with it
        try:
            if alone and outcome is None and self._stored is not None and self._claim is not None:
                # The claim rides on the first token's announcement (runs/claim.py).
                if not await self._claim.announcing(progress.events):
                    self.unstored = True
                    return
                self._stored = None
                if not self._claim.announced:
                    await announce_batch(self._recorder.run_id, progress.events)
                self._told = progress
                self._wake.set()
                return
            if alone and outcome is None:
                # ... and written with the run's next write (its end, or the next point of the
                # grid: the loop comes round again), one statement a run where it was two. A
                # follower that misses the announcement finds the batch in the log, as every
                # later announcement follows that write's commit. Never the run's end: a
                # client told of it may send its next turn at once.
                await announce_batch(self._recorder.run_id, progress.events)
                self._told = progress
                self._wake.set()
                return
            if alone:
                await self._store.record(
                    run_id=self._recorder.run_id, thread_pk=self._thread_pk, progress=progress
                )
            else:
                await log_writer_for_loop().write(
                    run_id=self._recorder.run_id,
                    thread_pk=self._thread_pk,
                    progress=progress,
                    told=told,
                )
                return  # written and announced (but for what was told already)
        except Exception:
            if trace is None:
                if outcome is None:
                    self._unwritten.append(progress)
                raise
            # Tracing is best effort: the run's end is stored without its spans rather than
            # not at all.
            logger.warning(
                "storing the spans of run %s failed; its end is stored without them",
                self._recorder.run_id,
                exc_info=True,
            )
            progress.trace = None
            await self._store.record(
                run_id=self._recorder.run_id, thread_pk=self._thread_pk, progress=progress
            )
        # Logged (and committed) first, announced second: a follower can always catch up.
        await announce_batch(self._recorder.run_id, progress.events[told:])

    def _claims_announcing(self, outcome: RunOutcome | None) -> bool:
        """Whether this write's claim may ride on the first token's announcement."""
        return (
            self._claim is not None
            and self._claim.open
            and outcome is None
            and self._first_token_at_once
            and self._recorder.first_token_pending
        )

    async def _claimed(self) -> bool:
        """Wait for the run's claim (taking it now if it waited for an announcement)."""
        if self._claim is not None:
            self._claim.take()
        assert self._stored is not None
        if not await turn_committed(self._stored):
            self.unstored = True
            return False
        self._stored = None
        return True

    async def close(self, outcome: RunOutcome, trace: SpanWrite | None = None) -> None:
        """Write everything still pending, and the run's end (with its spans), after any
        write in progress."""
        self._closing = True
        if self._start_timer is not None:
            self._start_timer.cancel()
            self._start_timer = None
        self._hurry.set()
        self._wake.set()
        if self._task is not None:
            await self._task
        await self._write(outcome, trace)


def _joined(told: Progress, later: Progress) -> Progress:
    """One write of a batch announced already and the run's next one: the same rows, in order."""
    return Progress(
        events=told.events + later.events,
        messages=told.messages + later.messages,
        agent_states=told.agent_states + later.agent_states,
        first_token_at=told.first_token_at or later.first_token_at,
        outcome=later.outcome,
        interrupted=later.interrupted,
        first_position=told.first_position,
        trace=later.trace,
        start=told.start or later.start,
    )
