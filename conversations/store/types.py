"""What the turn's storage path takes and gives, independent of the database."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, NamedTuple, Protocol

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from conversations.services.messages import OutputMessage
from conversations.services.runs import LoggedEvent, RunOutcome
from copilot_runtime.history import KnownHistory

# Given the ids of a busy thread's active runs: fails those whose executor died (synchronous:
# the reaper is an ORM service, and the ORM store calls it inside its own transaction).
Reap = Callable[[list[str]], int]


@dataclass(slots=True)
class TurnRecord:
    """What a turn's preparation stores."""

    thread_id: str
    user: AbstractBaseUser | AnonymousUser
    agent_name: str
    protocol: str
    request_type: str
    previous_run_id: str
    # InputMessage objects (copilot_runtime.events.request), in the client's order.
    messages: list[Any]
    run_id: str
    # The latest stored state of ``agent_name`` is read only when the client sent none.
    want_state: bool = True
    # Given the agent's latest stored state (read by the same preparation): builds the request
    # for the process that executes the run (Celery), and returns what the run keeps of it.
    request_payload_for: Callable[[dict[str, Any] | None], dict[str, Any] | None] | None = None
    # Executed at once by this process (inline): the run is stored already running, which
    # saves the executor its separate pending -> running write.
    start_running: bool = False
    # The caller may start the run while the turn's write is still in flight: ``prepare``
    # returns once the thread has been read and checked, with ``PreparedTurn.stored`` to
    # await (a store that writes in one step may ignore this).
    start_before_stored: bool = False
    # What this process knows of ``messages`` and of what the thread stores of them
    # (copilot_runtime/history): a store may ask the database about the other ids only, and
    # keeps what it learns there for the next turn. None: nothing known, nothing kept.
    history: KnownHistory | None = None
    # Where the run executes (the runtime's executor kind), stored with the run's row.
    executor: str = ""


@dataclass(frozen=True, slots=True)
class PreparedTurn:
    run_id: str
    thread_id: str
    # The thread's primary key, so later writes need no lookup.
    thread_pk: int
    # The latest stored state of the turn's agent (None: none stored, or not asked for).
    latest_state: dict[str, Any] | None = None
    # Ids of the client's messages that were new to the thread (stored by this turn).
    new_message_ids: tuple[str, ...] = ()
    # The position the run's first output message takes (None: looked up when stored). One
    # run at a time per thread, so the executor can count on from here.
    next_position: int | None = None
    # When the turn was prepared with ``start_before_stored``: done when its run, new messages
    # and thread status are committed, or failed (``ThreadBusy``, a database error) with
    # nothing of the turn stored. None: stored before ``prepare`` returned.
    stored: asyncio.Future[None] | None = None


class RunStart(NamedTuple):
    """A run a worker took without marking it running first (its task's first delivery, see
    copilot_runtime/runs/claim_redis.py): recorded with the run's first write, as ``mark_running``
    would have at its start, and once only (a later one, or one after the heartbeat recorded
    the start, changes nothing)."""

    started_at: dt.datetime
    model: str


@dataclass(slots=True)
class Progress:
    """One batch of a run's progress (see ``RunRecorder.take_batch``)."""

    events: list[LoggedEvent]
    messages: list[OutputMessage]
    agent_states: list[dict[str, Any]]
    first_token_at: dt.datetime | None = None
    outcome: RunOutcome | None = None
    # The run paused for the user (an interrupt): a succeeded run then ends interrupted.
    interrupted: bool = False
    # Where ``messages`` start in the thread (None: after the thread's last message).
    first_position: int | None = None
    # With the run's end: its trace spans and cost, written in the same transaction.
    trace: SpanWrite | None = None
    # The run's start, not recorded yet: pending -> running (or straight to its end).
    start: RunStart | None = None


class RunProgress(NamedTuple):
    run_id: str
    # The run's thread, when the writer knows it (None: looked up from the run).
    thread_pk: int | None
    progress: Progress


@dataclass(slots=True)
class SpanWrite:
    trace_id: str
    records: list[Any]  # copilot_runtime.tracing.records.SpanRecord
    cost: Decimal | None
    persist_spans: bool
    # Content the spans refer to by sha256 (system prompts, tool definitions): TraceBlob rows.
    blobs: dict[str, Any] = field(default_factory=dict)


class TurnStore(Protocol):
    async def prepare(self, *, turn: TurnRecord, reap: Reap) -> PreparedTurn:
        """Record the thread (created on first use, ownership checked), refuse a busy one
        (``reap`` first fails those of its active runs whose executor died), store the
        client's new messages and a pending run, in one transaction (which may still be in
        flight on return: see ``TurnRecord.start_before_stored``)."""
        ...

    async def mark_running(self, *, run_id: str, model: str) -> bool: ...

    async def check(self) -> None:
        """One round trip on the connections the next turn would use (``/readyz``); raises
        the database's error when it cannot be made."""
        ...

    async def record(self, *, run_id: str, thread_pk: int | None, progress: Progress) -> None:
        """One run's next progress (``record_many`` of one entry)."""
        ...

    async def record_many(self, *, entries: Sequence[RunProgress]) -> None:
        """The next progress of several runs (at most one entry each), atomic as a whole: what
        the runs one event loop executes hand over at about the same moment."""
        ...

    async def heartbeats(self, *, run_ids: list[str]) -> set[str]:
        """Renew the heartbeats of the runs this process executes, in one statement; the ids
        of those whose stop was requested. A run still pending (taken without marking it
        running, and not written yet) is recorded running from now."""
        ...

    async def store_trace(self, *, run_id: str, trace: SpanWrite) -> None:
        """Store a closed, priced trace on its own (a run whose end another write stored)."""
        ...

    async def read_log(
        self, *, run_id: str, after_seq: int, before_seq: int | None, limit: int
    ) -> list[LoggedEvent]:
        """Logged events with ``after_seq < seq < before_seq``, in order, at most ``limit``
        (a follower catching up: once per followed run, and at every gap)."""
        ...


async def turn_committed(stored: asyncio.Future[None] | None) -> bool:
    """Whether a prepared turn's write (``PreparedTurn.stored``) was committed, once it ends;
    True at once for a turn stored before ``prepare`` returned (None)."""
    if stored is None:
        return True
    try:
        await asyncio.shield(stored)
    except BaseException:
        if not stored.done():
            raise  # the caller itself was cancelled
    return not stored.cancelled() and stored.exception() is None
