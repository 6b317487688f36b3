"""The run's event log, announced on the channel layer and followed by any process.

The process executing a run writes each batch of events to ``RunEvent`` first, then announces
it on the run's group. The layer is a lossy notification bus (it drops messages at capacity),
so a follower treats Postgres as the truth: it reads what it missed from the log whenever it
attaches late or sees a gap in the sequence numbers, and skips what it has already yielded.
The followed stream is exactly the logged stream: no gap, no duplicate, same order.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from channels.layers import get_channel_layer
from django.db import DatabaseError

from conversations.selectors import run_log_read
from conversations.services.runs import LoggedEvent
from conversations.store import turn_store
from copilot_runtime.conf import runtime_setting
from copilot_runtime.events import RunFinished
from copilot_runtime.runs.claim_redis import claim_in_layer_announcing
from copilot_runtime.runs.layer_groups import GroupListener, leave_quietly
from copilot_runtime.runs.layer_publish import group_send_many
from copilot_runtime.runs.replies import ReplySlot, announcements

logger = logging.getLogger(__name__)

BATCH_MESSAGE = "run.batch"
# How often a follower with nothing to read checks the run is still alive.
IDLE_CHECK_SECONDS = 1.0
# How often a follower without a channel layer reads the log.
POLL_SECONDS = 0.1
LOG_PAGE = 1000


def run_group(run_id: str) -> str:
    """The layer group of a run's events (a hash: group names allow few characters)."""
    return "run." + hashlib.sha1(run_id.encode()).hexdigest()


def _batch_message(events: list[LoggedEvent]) -> dict[str, Any]:
    return {
        "type": BATCH_MESSAGE,
        "events": [[event.seq, event.type, event.payload] for event in events],
    }


async def announce_batch(run_id: str, events: list[LoggedEvent]) -> None:
    """Tell followers a batch was logged (on the run's group, and on the reply group its task
    named: copilot_runtime/runs/replies.py). Best effort: the log already has it."""
    layer = get_channel_layer()
    if layer is None or not events:
        return
    messages = announcements(run_id, run_group(run_id), _batch_message(events))
    try:
        if len(messages) == 1:
            await layer.group_send(*messages[0])
        else:
            await group_send_many(layer, messages)
    except Exception:  # a layer outage must not fail the run; followers read the log
        logger.warning("could not announce a batch of run %s", run_id, exc_info=True)


async def announce_claiming(run_id: str, events: list[LoggedEvent]) -> bool | None:
    """``announce_batch`` for a run's first announcement, which also takes the run's claim in
    Redis (copilot_runtime/runs/claim_redis.py): sent only if the claim is taken. None: the claim
    cannot ride on it (nothing sent). Raises what Redis raised."""
    messages = announcements(run_id, run_group(run_id), _batch_message(events))
    return await claim_in_layer_announcing(run_id, messages)


async def announce_batches(batches: Sequence[tuple[str, list[LoggedEvent]]]) -> None:
    """``announce_batch`` for several runs' batches logged together: one round trip on a
    Redis pub/sub layer (copilot_runtime/runs/layer_publish.py)."""
    layer = get_channel_layer()
    messages = [
        announced
        for run_id, events in batches
        if events
        for announced in announcements(run_id, run_group(run_id), _batch_message(events))
    ]
    if layer is None or not messages:
        return
    try:
        await group_send_many(layer, messages)
    except Exception:  # as above: followers read what they missed from the log
        logger.warning("could not announce the batches of %d runs", len(messages), exc_info=True)


# What a read of the log (or a liveness check) raises while the database cannot answer.
_LOG_ERRORS = (DatabaseError, OSError)


class _LogOutage:
    """How long a follower has gone without the log, and whether it may still wait."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.since: float | None = None
        self.last_heard = time.monotonic()

    def heard(self) -> None:
        self.last_heard = time.monotonic()

    def answered(self) -> None:
        if self.since is not None:
            logger.info("the event log answers again; following run %s", self.run_id)
        self.since = None

    def failed(self, error: BaseException) -> None:
        """The log could not be read: go on with the layer, unless neither has said anything
        for as long as a run's executor may stay silent before it counts as dead."""
        now = time.monotonic()
        if self.since is None:
            self.since = now
            logger.warning(
                "the event log cannot be read (%s); following run %s on the layer alone",
                error,
                self.run_id,
            )
        bound = float(runtime_setting("RUN_STALE_SECONDS"))
        if now - self.since > bound and now - self.last_heard > bound:
            raise error


# The log read through the ORM, for the callers that read it synchronously (replay, threads).
log_read = run_log_read


async def log_fetch(
    *, run_id: str, after_seq: int, before_seq: int | None = None
) -> list[LoggedEvent]:
    """A follower's read of the log: through the turn store, on PostgreSQL without a thread
    hop or the ORM (an ORM read here was a seventh of a web process's CPU in the celery
    shape, one per followed run)."""
    return await turn_store().read_log(
        run_id=run_id, after_seq=after_seq, before_seq=before_seq, limit=LOG_PAGE
    )


async def join_run(run_id: str) -> GroupListener | None:
    """Listen to the run's group; None when there is no layer or it fails (a follower then
    reads the log alone)."""
    layer = get_channel_layer()
    if layer is None:
        return None
    try:
        return await GroupListener.join(layer, run_group(run_id))
    except Exception:
        logger.warning(
            "channel layer unavailable; following run %s from the log", run_id, exc_info=True
        )
        return None


async def follow_run(
    run_id: str,
    *,
    after_seq: int = 0,
    check_alive: Callable[[], Awaitable[None]] | None = None,
    joined: GroupListener | ReplySlot | None = None,
) -> AsyncIterator[LoggedEvent]:
    """Every logged event of the run after ``after_seq``, live, until ``run_finished``.

    ``check_alive`` is awaited whenever nothing arrived for ``IDLE_CHECK_SECONDS``: it may
    end a run whose executor died (appending its final events to the log). When the layer
    fails (Redis restarted, unreachable), the follower keeps going on the log alone.

    ``joined``: the caller's ``join_run`` (or its slot of the loop's reply group), made before
    the run was queued. Nothing can have been logged before it, so the log is not read first (a
    statement per turn in the celery shape); it still is on any gap, and when the layer is
    silent. The follower leaves it.

    When the database cannot be read (restarting, failing over) the follower goes on with
    what the layer brings, in order, and reads what it could not from the log once the
    database answers again. It gives up only when neither has said anything for
    ``RUN_STALE_SECONDS``.
    """
    listener = joined if joined is not None else await join_run(run_id)
    next_seq = after_seq + 1
    finished = False
    log_lost = _LogOutage(run_id)

    async def backlog(until: int | None = None) -> AsyncIterator[LoggedEvent]:
        nonlocal next_seq, finished
        while not finished:
            rows = await log_fetch(run_id=run_id, after_seq=next_seq - 1, before_seq=until)
            for row in rows:
                next_seq = row.seq + 1
                yield row
                if row.type == RunFinished.type:
                    finished = True
                    return
            if len(rows) < LOG_PAGE:
                return

    try:
        if joined is None:
            # Joined first, then read: nothing logged in between can be missed.
            async for row in backlog():
                yield row
        idle = 0.0
        while not finished:
            if listener is None:
                # No layer: poll the log (the executor writes it every few milliseconds).
                await asyncio.sleep(POLL_SECONDS)
                idle += POLL_SECONDS
                before = next_seq
                async for row in backlog():
                    yield row
                if next_seq != before:
                    idle = 0.0
                elif idle >= IDLE_CHECK_SECONDS and check_alive is not None:
                    idle = 0.0
                    await check_alive()
                continue
            try:
                message: dict[str, Any] = await asyncio.wait_for(
                    listener.receive(), IDLE_CHECK_SECONDS
                )
            except TimeoutError:
                try:
                    if check_alive is not None:
                        await check_alive()
                    async for row in backlog():
                        yield row
                except _LOG_ERRORS as error:
                    log_lost.failed(error)
                else:
                    log_lost.answered()
                continue
            except Exception:
                logger.warning(
                    "channel layer failed; following run %s from the log", run_id, exc_info=True
                )
                await leave_quietly(listener)
                listener = None
                continue
            if message.get("type") != BATCH_MESSAGE:
                continue
            log_lost.heard()
            for seq, event_type, payload in message["events"]:
                if finished or seq < next_seq:
                    continue  # already yielded (read from the log before the layer caught up)
                if seq > next_seq:
                    # The layer dropped something: the log has it. Without the database, what
                    # comes after the gap waits for the log too (read once it answers).
                    try:
                        async for row in backlog(until=seq):
                            yield row
                    except _LOG_ERRORS as error:
                        log_lost.failed(error)
                if seq != next_seq:
                    continue
                next_seq = seq + 1
                yield LoggedEvent(seq=seq, type=event_type, payload=payload)
                if event_type == RunFinished.type:
                    finished = True
    finally:
        if listener is not None:
            await leave_quietly(listener)
