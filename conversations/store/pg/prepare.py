"""A turn's preparation on PostgreSQL: ``PgTurnStore.prepare``.

Its thread is looked up (statement 1, ``look_up.py``) and checked: its owner, its active runs
(reaped when their executors died, else the turn is refused); stored messages the client no
longer sends are set aside; then its run, its new messages and its thread's status are written
(statement 2, ``turn_write.py``). No transaction spans the two statements: the database keeps
one active run per thread (run_one_active_per_thread), so of two requests racing on a thread
the second one's write fails whole, as the thread's being busy.

The write may go on in a task of its own while the caller's run asks its model
(``TurnRecord.start_before_stored``): ``PreparedTurn.stored`` then carries its outcome.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import Any, NamedTuple

import psycopg
from django import db as django_db
from django.utils import timezone

from conversations.models import RunStatus, ThreadStatus
from conversations.services.runs import ThreadBusy
from conversations.services.threads import title_from_text
from conversations.store.health import db_sync_to_async
from conversations.store.pg.errors import RACED, Busy, translate
from conversations.store.pg.history_ids import known_ids, remember_stored, stored_by_id
from conversations.store.pg.look_up import LookUp, look
from conversations.store.pg.pools import POOLS
from conversations.store.pg.turn_write import (
    TurnWrite,
    new_message_rows,
    supersede_messages,
    write_turn,
)
from conversations.store.types import PreparedTurn, Reap, TurnRecord
from copilot_runtime.history import ThreadKey

# The turn writes in flight (see ``prepare_turn``).
_WRITES: set[asyncio.Task[None]] = set()


async def prepare_turn(turn: TurnRecord, reap: Reap) -> PreparedTurn:
    """``TurnStore.prepare`` (see ``conversations/store/types.py``)."""
    if not turn.start_before_stored:
        return await _prepare_translated(turn, reap, None)
    # The turn's write (statement 2) goes on in a task of its own; this returns as soon as
    # statement 1 has been read and the write is sent, so the caller's run can ask its
    # model meanwhile. ``ahead`` carries the outcome of everything before the write.
    loop = asyncio.get_running_loop()
    ahead: asyncio.Future[PreparedTurn] = loop.create_future()
    writing = loop.create_task(_prepare_ahead(turn, reap, ahead))
    try:
        prepared = await ahead
    except BaseException:
        # Failed before the write (the task ends with the same error), or the request went
        # before its turn was read: nothing is stored.
        writing.cancel()
        writing.add_done_callback(_retrieve)
        raise
    stored: asyncio.Future[None] = loop.create_future()
    _WRITES.add(writing)  # held until it ends: the loop keeps only a weak reference
    writing.add_done_callback(_WRITES.discard)
    writing.add_done_callback(lambda task: _settle(stored, task))
    return dataclasses.replace(prepared, stored=stored)


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # known to the caller already; retrieved so asyncio logs nothing


def _settle(stored: asyncio.Future[None], writing: asyncio.Task[None]) -> None:
    """The write's outcome on ``stored``: a future of its own, so that a caller cancelled
    while awaiting it never cancels the write itself."""
    if stored.done():
        return
    if writing.cancelled():
        stored.cancel()
    elif (error := writing.exception()) is not None:
        stored.set_exception(error)
    else:
        stored.set_result(None)


async def _prepare_ahead(turn: TurnRecord, reap: Reap, ahead: asyncio.Future[PreparedTurn]) -> None:
    try:
        await _prepare_translated(turn, reap, ahead)
    except BaseException as exc:
        if not ahead.done():  # failed before the write: the caller learns it from ahead
            if isinstance(exc, asyncio.CancelledError):
                ahead.cancel()
            else:
                ahead.set_exception(exc)
        raise


async def _prepare_translated(
    turn: TurnRecord, reap: Reap, ahead: asyncio.Future[PreparedTurn] | None
) -> PreparedTurn:
    try:
        try:
            return await _prepare(turn, ahead)
        except Busy as busy:
            # Reaped outside the transaction: the reaper updates the thread row we held.
            if await db_sync_to_async(reap)(busy.running):
                return await _prepare(turn, ahead)
            raise ThreadBusy(turn.thread_id) from None
    except psycopg.Error as exc:
        raise translate(exc) from exc


async def _prepare(turn: TurnRecord, ahead: asyncio.Future[PreparedTurn] | None) -> PreparedTurn:
    """One attempt: the look-up, the checks, the messages set aside, then the write (whose
    start ``ahead`` is told of, when given)."""
    now = timezone.now()
    user = turn.user
    owner_id = user.pk if user.is_authenticated else None
    first_of = stored_by_id(turn.messages, turn.history)
    incoming = list(first_of)
    # By owner and id: two owners' threads of one client id are two threads.
    thread_key = (owner_id, turn.thread_id)
    thread, asked = await _look_up(turn, thread_key, incoming, now)
    _check(thread, owner_id)
    # The current ones of the ids asked about, and the superseded ones; the ids not asked
    # about are known current at the thread's version.
    probed_current, restore = thread.sent
    current_sent = probed_current + len(incoming) - len(asked)
    last = -1 if thread.last_position is None else thread.last_position
    superseding = await _set_aside(
        thread, turn, incoming, current_sent=current_sent, restore=restore, last=last
    )
    rows = new_message_rows(first_of, thread.missing or (), last, now)
    latest = dict(thread.latest) if isinstance(thread.latest, dict) else None
    prepared = PreparedTurn(
        run_id=turn.run_id,
        thread_id=turn.thread_id,
        thread_pk=thread.pk,
        latest_state=latest,
        new_message_ids=tuple(row[1] for row in rows),
        next_position=last + len(rows) + 1,
    )
    if ahead is not None and not ahead.done():
        ahead.set_result(prepared)  # the caller may start the run now
    new_title = "" if thread.title else _title(rows)
    await _write(turn, _turn_write(turn, thread.pk, rows, new_title, latest, now))
    if not superseding:
        remember_stored(
            turn.history,
            thread_key,
            thread.pk,
            thread.version,
            first_of,
            asked,
            thread.missing,
            probed_current,
        )
    return prepared


class _Thread(NamedTuple):
    """What the look-up read of the turn's thread (``look``'s row)."""

    pk: int
    owner_id: int | None
    title: str
    active: list[list[Any]] | None  # its active runs, [id, status] each
    missing: list[str] | None  # of the ids asked about, those it does not hold
    sent: list[Any]  # of the ids asked about: [the current ones' count, the superseded ones]
    set_aside: int  # the count of its messages set aside (superseded, agent states)
    last_position: int | None
    latest: Any  # the latest state of the turn's agent, when asked for
    version: int  # its history version


async def _look_up(
    turn: TurnRecord, thread_key: ThreadKey, incoming: list[str], now: dt.datetime
) -> tuple[_Thread, list[str]]:
    """Statement 1, shared with the loop's other turns that come while one is in flight: the
    thread (created on first use), and the ids asked about, which are the ids the request
    carries save the ones its history says the thread holds as current (a continued thread's
    are its new messages)."""
    known = known_ids(turn.history, thread_key)
    asked = incoming if known is None else [i for i in incoming if i not in known.ids]
    look_up = LookUp(
        thread_id=turn.thread_id,
        owner_id=thread_key[0],
        agent_name=turn.agent_name,
        ids=asked,
        state_of=turn.agent_name if turn.want_state else None,
        now=now,
    )
    row = await look(look_up)
    if known is not None and (row[0], row[-1]) != (known.thread_pk, known.version):
        # The thread's messages changed since (or it is another thread under the same
        # id): what this process knew of them is no longer so. Asked again, whole.
        _forget_stored(turn)
        asked = incoming
        row = await look(look_up._replace(ids=incoming))
    return _Thread._make(row), asked


def _check(thread: _Thread, owner_id: int | None) -> None:
    """Raises unless the thread is the caller's and has no active run (``Busy``)."""
    if thread.owner_id != owner_id:
        # Never so: the statement finds and creates threads by (id, owner). Checked all the
        # same, for a statement that would one day match by id alone.
        raise django_db.DatabaseError("the look-up returned another owner's thread")
    if thread.active:
        raise Busy([pk for pk, _status in thread.active])


def _forget_stored(turn: TurnRecord) -> None:
    if turn.history is not None:
        turn.history.stored = None


async def _set_aside(
    thread: _Thread,
    turn: TurnRecord,
    incoming: list[str],
    *,
    current_sent: int,
    restore: list[str] | None,
    last: int,
) -> bool:
    """Supersedes the thread's current messages the request no longer carries, and restores
    the superseded ones it carries again; whether anything was to be done."""
    # Positions are dense from 0, so this is the count of the thread's current messages;
    # with a gap (a row deleted by hand) it is more, and a turn that sent all of them only
    # runs a superseding that finds nothing: never one skipped.
    current_at_most = last + 1 - thread.set_aside
    superseding = current_sent != current_at_most or bool(restore)
    if superseding:
        _forget_stored(turn)  # the statements below change the version
        pool = await POOLS.get()
        async with pool.connection() as conn:
            await supersede_messages(
                conn.cursor(),
                thread.pk,
                incoming,
                supersede=current_sent != current_at_most,
                restore=restore or (),
            )
    return superseding


def _title(rows: list[tuple[Any, ...]]) -> str:
    """A title for an untitled thread, from the first user text among the turn's new message
    rows ("": none). Only new ones: a stored message that left the thread untitled (one the
    guardrails denied) does not title it when the client sends it again."""
    first_user = next((row for row in rows if row[2] == "text" and row[3] == "user"), None)
    if first_user is not None and first_user[4].strip():
        return title_from_text(first_user[4])
    return ""


def _turn_write(
    turn: TurnRecord,
    thread_pk: int,
    rows: list[tuple[Any, ...]],
    new_title: str,
    latest: dict[str, Any] | None,
    now: dt.datetime,
) -> TurnWrite:
    """The turn's rows: its run, its new messages (``rows``) and its thread's status."""
    running = turn.start_running
    payload = turn.request_payload_for(latest) if turn.request_payload_for is not None else None
    return TurnWrite(
        run=[
            turn.run_id,
            thread_pk,
            turn.agent_name,
            turn.protocol,
            turn.request_type,
            turn.previous_run_id or "",
            str(RunStatus.RUNNING if running else RunStatus.PENDING),
            now,
            now if running else None,
            now if running else None,
            payload,
            1 if running else 0,
            turn.executor,
        ],
        messages=[(*row, thread_pk, turn.run_id) for row in rows],
        thread=[thread_pk, str(ThreadStatus.RUNNING), now, new_title],
    )


async def _write(turn: TurnRecord, write: TurnWrite) -> None:
    """Statement 2, likewise grouped: the run, the new messages and the thread's status,
    atomically."""
    try:
        await write_turn(write)
    except psycopg.errors.UniqueViolation as exc:
        # Another request on this thread wrote first (its run, or the same new messages); a
        # reused run id is the caller's own conflict.
        if exc.diag.constraint_name in RACED:
            raise ThreadBusy(turn.thread_id) from None
        raise
