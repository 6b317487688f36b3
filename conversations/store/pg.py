"""The turn's storage path in raw SQL on PostgreSQL (psycopg's async pool, no thread hop).

The only raw SQL of the app, kept in this module and ``pg_progress.py`` and tested against the
ORM (tests/conversations/store/): each function writes exactly the rows the ORM services write
(``conversations/services``), with the same defaults. A turn costs:

- its look-up: one statement (the thread, created on first use; its active runs; only the
  message ids the request carries; the latest state), shared with the turns of the same event
  loop that come while a look-up is in flight (``grouped.py``);
- its write (the run, the new messages, the thread's status): likewise one statement for the
  turns whose look-ups end while a write is in flight;
- what its run writes as it goes (events, finished messages, states, the first token's time,
  its end with its spans): likewise one statement for the runs of the loop that hand theirs
  over at about the same moment (``pg_progress.py``).

A connection is held only while those statements run, never while the model streams, so the
pool's size bounds concurrent statements, not concurrent conversations.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import re
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson
import psycopg
from django import db as django_db
from django.db import connections
from django.utils import timezone
from psycopg.conninfo import make_conninfo

from conversations.models import MessageKind, RunStatus, ThreadStatus
from conversations.services.messages import _NOT_STORED_ROLES
from conversations.services.runs import LoggedEvent, ThreadBusy
from conversations.services.threads import title_from_text
from conversations.store.grouped import Grouped, PerLoop
from conversations.store.health import db_sync_to_async
from conversations.store.known import KNOWN, KnownHistory, ThreadKey
from conversations.store.pg_progress import (
    AGENT_STATE,
    MESSAGE,
    RUN,
    RUN_EVENT,
    THREAD,
    progress_statement,
)
from conversations.store.pool import TurnPool
from conversations.store.types import (
    PreparedTurn,
    Progress,
    Reap,
    RunProgress,
    SpanWrite,
    TurnRecord,
)
from copilot_runtime.events.recent import PrefixMemo, first_input_id

logger = logging.getLogger(__name__)


# An escaped NUL, not preceded by an escaped backslash (the text "\\u0000" stays as it is).
_NUL = re.compile(rb"(?<!\\)((?:\\\\)*)\\u0000")


def _dumps_bytes(value: Any) -> bytes:
    # Django's JSONField writes with json.dumps; orjson writes the same JSON for the values
    # the runtime stores (it also accepts non-str keys, as json does, when told to).
    data = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    if b"\\u0000" in data:
        # PostgreSQL stores no NUL character in text or jsonb; models do emit them (in a tool
        # call's arguments, say). Kept visible as U+FFFD rather than failing the run's write.
        data = _NUL.sub(rb"\1\\ufffd", data)
    return data


def _dumps(value: Any) -> str:
    return _dumps_bytes(value).decode()


def _conninfo() -> str:
    params = dict(connections["default"].get_connection_params())
    for key in ("context", "cursor_factory", "prepare_threshold", "server_side_binding"):
        params.pop(key, None)
    return make_conninfo(**{k: v for k, v in params.items() if v not in (None, "")})


def _translate(exc: psycopg.Error) -> Exception:
    """psycopg's errors as Django's, so callers handle both stores alike."""
    for psycopg_class, django_class in (
        (psycopg.errors.IntegrityError, django_db.IntegrityError),
        (psycopg.errors.DataError, django_db.DataError),
        (psycopg.errors.OperationalError, django_db.OperationalError),
    ):
        if isinstance(exc, psycopg_class):
            return django_class(str(exc))
    return django_db.DatabaseError(str(exc))


# The turn writes in flight (see ``PgTurnStore.prepare``).
_WRITES: set[asyncio.Task[None]] = set()


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


# Every statement of this store finds its rows by key. psycopg prepares a statement on its
# fifth run and PostgreSQL then keeps one generic plan for it, planned for the tables as they
# were: on a new site that is nearly empty, where a sequential scan is cheapest, and nothing
# replans it until an ANALYZE (autovacuum's first comes after a minute or more). Meanwhile
# the tables grow and each run's end scanned the whole runs table, slower by the second. With
# sequential scans priced out, the plan is the
# index's whatever the statistics say.
SESSION_SETUP = "SET enable_seqscan = off"


class _Pools:
    """One async pool per event loop (a pool is bound to the loop that opened it)."""

    def __init__(self) -> None:
        self._pools: dict[int, tuple[asyncio.AbstractEventLoop, TurnPool]] = {}

    async def get(self) -> TurnPool:
        loop = asyncio.get_running_loop()
        entry = self._pools.get(id(loop))
        if entry is not None and entry[0] is loop:
            return entry[1]
        from copilot_runtime.conf import runtime_setting

        pool = TurnPool(
            _conninfo(),
            max_size=int(runtime_setting("DATABASE_ASYNC_POOL_MAX")),
            timeout=float(runtime_setting("DATABASE_WAIT_SECONDS")),
            session_setup=SESSION_SETUP,
        )
        self._pools[id(loop)] = (loop, pool)
        return pool

    async def close_all(self) -> None:
        loop = asyncio.get_running_loop()
        for key, (pool_loop, pool) in list(self._pools.items()):
            if pool_loop is loop:
                await pool.close()
                del self._pools[key]


POOLS = _Pools()


class PgTurnStore:
    async def _connection(self) -> Any:
        pool = await POOLS.get()
        return pool.connection()

    # --- prepare ------------------------------------------------------------------------------

    async def prepare(self, *, turn: TurnRecord, reap: Reap) -> PreparedTurn:
        if not turn.start_before_stored:
            return await self._prepare_translated(turn, reap, None)
        # The turn's write (statement 2) goes on in a task of its own; this returns as soon as
        # statement 1 has been read and the write is sent, so the caller's run can ask its
        # model meanwhile. ``ahead`` carries the outcome of everything before the write.
        loop = asyncio.get_running_loop()
        ahead: asyncio.Future[PreparedTurn] = loop.create_future()
        writing = loop.create_task(self._prepare_ahead(turn, reap, ahead))
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

    async def _prepare_ahead(
        self, turn: TurnRecord, reap: Reap, ahead: asyncio.Future[PreparedTurn]
    ) -> None:
        try:
            await self._prepare_translated(turn, reap, ahead)
        except BaseException as exc:
            if not ahead.done():  # failed before the write: the caller learns it from ahead
                if isinstance(exc, asyncio.CancelledError):
                    ahead.cancel()
                else:
                    ahead.set_exception(exc)
            raise

    async def _prepare_translated(
        self, turn: TurnRecord, reap: Reap, ahead: asyncio.Future[PreparedTurn] | None
    ) -> PreparedTurn:
        try:
            try:
                return await self._prepare(turn, ahead)
            except _Busy as busy:
                # Reaped outside the transaction: the reaper updates the thread row we held.
                if await db_sync_to_async(reap)(busy.running):
                    return await self._prepare(turn, ahead)
                raise ThreadBusy(turn.thread_id) from None
        except psycopg.Error as exc:
            raise _translate(exc) from exc

    async def _prepare(
        self, turn: TurnRecord, ahead: asyncio.Future[PreparedTurn] | None
    ) -> PreparedTurn:
        now = timezone.now()
        user = turn.user
        owner_id = user.pk if user.is_authenticated else None
        first_of = _stored_by_id(turn.messages)
        incoming = list(first_of)
        # Statement 1, shared with the loop's other turns that come while one is in flight:
        # everything the turn needs to know; the thread is created on first use. Of the
        # messages, only the ids the request carries are read, and two aggregates: never the
        # whole thread; and of those ids, only the ones this process does not already know
        # the thread holds as current (``KNOWN``: a continued thread's new messages). No
        # transaction spans the two statements: the database keeps one active run per thread
        # (run_one_active_per_thread), so of two requests racing on a thread the second one's
        # write fails whole, as THREAD_BUSY.
        # By owner and id: two owners' threads of one client id are two threads.
        thread_key = (owner_id, turn.thread_id)
        known = KNOWN.get(thread_key)
        asked = incoming if known is None else [i for i in incoming if i not in known.ids]
        look_up = LookUp(
            thread_id=turn.thread_id,
            owner_id=owner_id,
            agent_name=turn.agent_name,
            ids=asked,
            state_of=turn.agent_name if turn.want_state else None,
            now=now,
        )
        row = await _look(look_up)
        if known is not None and (row[0], row[-1]) != (known.thread_pk, known.version):
            # The thread's messages changed since (or it is another thread under the same
            # id): what this process knew of them is no longer so. Asked again, whole.
            KNOWN.forget(thread_key)
            asked = incoming
            row = await _look(look_up._replace(ids=incoming))
        (
            thread_pk,
            stored_owner,
            title,
            active,
            missing,
            (current_sent, restore),
            set_aside,
            last_position,
            latest,
            version,
        ) = row
        probed_current = current_sent  # of the ids asked about
        current_sent += len(incoming) - len(asked)  # the ids known: current at ``version``
        latest = dict(latest) if isinstance(latest, dict) else None
        if stored_owner != owner_id:
            # Never so: the statement finds and creates threads by (id, owner). Checked all the
            # same, for a statement that would one day match by id alone.
            raise django_db.DatabaseError("the look-up returned another owner's thread")
        if active:
            raise _Busy([pk for pk, _status in active])
        last = -1 if last_position is None else last_position
        # Positions are dense from 0, so this is the count of the thread's current messages;
        # with a gap (a row deleted by hand) it is more, and a turn that sent all of them only
        # runs a superseding that finds nothing: never one skipped.
        current_at_most = last + 1 - set_aside
        superseding = current_sent != current_at_most or bool(restore)
        if superseding:
            KNOWN.forget(thread_key)  # the statements below change the version
            async with await self._connection() as conn:
                await _supersede(
                    conn.cursor(),
                    thread_pk,
                    incoming,
                    supersede=current_sent != current_at_most,
                    restore=restore or (),
                )
        rows = _new_message_rows(first_of, missing or (), last, now)
        new_title = ""
        if not title:
            first_user = next(
                (m for m in first_of.values() if m.kind == "text" and m.role == "user"),
                None,
            )
            if first_user is not None and first_user.content.strip():
                new_title = title_from_text(first_user.content)
        running = turn.start_running
        prepared = PreparedTurn(
            run_id=turn.run_id,
            thread_id=turn.thread_id,
            thread_pk=thread_pk,
            latest_state=latest,
            new_message_ids=tuple(row[1] for row in rows),
            next_position=last + len(rows) + 1,
        )
        if ahead is not None and not ahead.done():
            ahead.set_result(prepared)  # the caller may start the run now
        payload = turn.request_payload_for(latest) if turn.request_payload_for is not None else None
        # Statement 2, likewise grouped: the run, the new messages and the thread's status,
        # atomically.
        write = TurnWrite(
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
            ],
            messages=[(*row, thread_pk, turn.run_id) for row in rows],
            thread=[thread_pk, str(ThreadStatus.RUNNING), now, new_title],
        )
        try:
            await _turn_writes.get().submit(write)
            if not superseding:
                _remember_known(
                    thread_key, thread_pk, version, first_of, asked, missing, probed_current
                )
        except psycopg.errors.UniqueViolation as exc:
            # Another request on this thread wrote first (its run, or the same new
            # messages); a reused run id is the caller's own conflict.
            if exc.diag.constraint_name in _RACED:
                raise ThreadBusy(turn.thread_id) from None
            raise
        return prepared

    # --- the run's life -----------------------------------------------------------------------

    async def mark_running(self, *, run_id: str, model: str) -> bool:
        now = timezone.now()
        row = await self._execute(
            f"UPDATE {RUN} SET status = %s, started_at = %s, heartbeat_at = %s,"
            " model = %s, attempts = attempts + 1 WHERE id = %s AND status = %s RETURNING 1",
            (str(RunStatus.RUNNING), now, now, model, run_id, str(RunStatus.PENDING)),
        )
        return row is not None

    async def heartbeats(self, *, run_ids: list[str]) -> set[str]:
        # A run whose start is not recorded yet (RunStart) is running from now, as
        # run_heartbeats records it through the ORM.
        now = timezone.now()
        rows = await self._execute(
            f"UPDATE {RUN} SET heartbeat_at = %(now)s, status = CASE WHEN started_at IS NULL"
            f" AND status = %(pending)s THEN %(running)s ELSE status END,"
            " attempts = attempts + CASE WHEN started_at IS NULL THEN 1 ELSE 0 END,"
            " started_at = coalesce(started_at, %(now)s)"
            " WHERE id = ANY(%(runs)s) RETURNING id, cancel_requested",
            {
                "now": now,
                "pending": str(RunStatus.PENDING),
                "running": str(RunStatus.RUNNING),
                "runs": run_ids,
            },
            many=True,
        )
        return {run_id for run_id, cancel_requested in rows or () if cancel_requested}

    async def record(self, *, run_id: str, thread_pk: int | None, progress: Progress) -> None:
        await self.record_many(entries=[RunProgress(run_id, thread_pk, progress)])

    async def record_many(self, *, entries: Sequence[RunProgress]) -> None:
        """The progress of several runs (at most one entry each) as ONE statement, atomic as
        a whole: see pg_progress.py."""
        statement = progress_statement(entries, now=timezone.now(), rows=_rows)
        if statement is not None:
            await self._execute(*statement, fetch=False)

    async def store_trace(self, *, run_id: str, trace: SpanWrite) -> None:
        await self.record(
            run_id=run_id,
            thread_pk=None,
            progress=Progress(events=[], messages=[], agent_states=[], trace=trace),
        )

    async def read_log(
        self, *, run_id: str, after_seq: int, before_seq: int | None, limit: int
    ) -> list[LoggedEvent]:
        until = "" if before_seq is None else " AND seq < %(before)s"
        rows = await self._execute(
            f"SELECT seq, type, payload FROM {RUN_EVENT}"
            f" WHERE run_id = %(run)s AND seq > %(after)s{until} ORDER BY seq LIMIT %(limit)s",
            {"run": run_id, "after": after_seq, "before": before_seq, "limit": limit},
            many=True,
        )
        return [LoggedEvent(seq=seq, type=kind, payload=payload) for seq, kind, payload in rows]

    async def check(self) -> None:
        await self._execute("SELECT 1", None, fetch=False)

    async def _execute(
        self, sql: str, params: Any, *, fetch: bool = True, many: bool = False
    ) -> Any:
        try:
            async with await self._connection() as conn:
                cur = await conn.execute(sql, params)
                if many:
                    return await cur.fetchall()
                return await cur.fetchone() if fetch else None
        except psycopg.Error as exc:
            raise _translate(exc) from exc


class LookUp(NamedTuple):
    """What one turn's look-up asks about its thread."""

    thread_id: str
    owner_id: int | None  # the caller: with ``thread_id``, the key of its thread (None: anonymous)
    agent_name: str
    ids: list[str]  # the message ids the request carries
    state_of: str | None  # the agent whose latest state is wanted, if any
    now: dt.datetime  # the thread's creation time, if it creates it


def _remember_known(
    thread_key: ThreadKey,
    thread_pk: int,
    version: int,
    first_of: dict[str, Any],
    asked: list[str],
    missing: Sequence[str] | None,
    probed_current: int,
) -> None:
    """After a turn stored without superseding anything: every id the request carried is now
    stored, and each one not an agent state is current, at ``version`` (adding messages leaves
    it as it is). The ids known before are; of the ids asked about, those the look-up found
    are, and the database's count of them must agree (an id stored under another kind than
    the request now gives it would not: then nothing is remembered); the missing ones were
    just written. Only the ids asked about are looked at one by one."""
    not_stored = set(missing or ())
    carried = 0
    added: list[str] = []
    for message_id in asked:
        if first_of[message_id].kind == MessageKind.AGENT_STATE:
            continue
        added.append(message_id)
        if message_id not in not_stored:
            carried += 1
    if carried != probed_current:
        KNOWN.forget(thread_key)
        return
    known_before = frozenset(first_of).difference(asked)
    KNOWN.remember(
        thread_key,
        KnownHistory(thread_pk=thread_pk, version=version, ids=known_before.union(added)),
    )


# What ``_stored_by_id`` made of a history, for the next turn re-sending the same messages.
_STORED_BY_ID: PrefixMemo[dict[str, Any]] = PrefixMemo(first_id=first_input_id)


def _stored_by_id(messages: list[Any]) -> dict[str, Any]:
    """The history's stored kinds by id, each id's first message (a client repeating an id
    stores it once), in order. A history re-sent with the next turn resumes after the messages
    the last turn's pass went over (``PrefixMemo``): the pass costs the new messages, not the
    thread. The dict returned may be the one kept: callers must not change it."""
    done, kept = _STORED_BY_ID.resume(messages)
    if done == len(messages) and kept is not None:
        return kept
    first_of: dict[str, Any] = dict(kept) if kept is not None else {}
    minted = False
    for message in messages[done:] if done else messages:
        if message.kind == "text" and message.role in _NOT_STORED_ROLES:
            continue
        if not message.id:  # a client may omit ids; never store a null one
            message.id = f"ck-{uuid.uuid4()}"
            minted = True
        if message.id not in first_of:
            first_of[message.id] = message
    if not minted:  # an id minted here is this turn's own: never resumed from
        _STORED_BY_ID.keep(messages, first_of)
    return first_of


class _Asked:
    """A look-up in a group, and then its row (None: its thread was not visible)."""

    __slots__ = ("look_up", "row")

    def __init__(self, look_up: LookUp) -> None:
        self.look_up = look_up
        self.row: tuple[Any, ...] | None = None


async def _look(look_up: LookUp) -> tuple[Any, ...]:
    """The look-up's row: the thread's pk, owner and title, its active runs, the carried ids
    it does not hold, (the current ones carried, the superseded ones carried), the count of
    messages set aside, the last position and the latest state."""
    # A thread created by a concurrent request that commits while the statement waits on its
    # row is invisible to the statement's snapshot (no row comes back): asked again, it is.
    for _ in range(3):
        asked = _Asked(look_up)
        await _look_ups.get().submit(asked)
        if asked.row is not None:
            return asked.row
    raise django_db.OperationalError("the thread could not be read back after its creation")


def look_ups_statement(look_ups: Sequence[LookUp]) -> tuple[str, list[str]]:
    """The one statement looking up ``look_ups``, and its parameters; a row per look-up whose
    thread is visible, its ordinal (from 1) first."""
    probed = all(len(look_up.ids) <= PROBED_IDS for look_up in look_ups)
    return (
        _LOOK_PROBED if probed else _LOOK_JOINED,
        [_rows([list(look_up) for look_up in look_ups])],
    )


async def _look_many(asked: Sequence[_Asked]) -> None:
    pool = await POOLS.get()
    async with pool.connection() as conn:
        cur = await conn.execute(*look_ups_statement([one.look_up for one in asked]))
        rows = await cur.fetchall()
    for row in rows:
        asked[row[0] - 1].row = tuple(row[1:])


_look_ups: PerLoop[Grouped[_Asked]] = PerLoop(lambda: Grouped(_look_many, at_once=True))


class _Busy(Exception):
    def __init__(self, running: list[str]) -> None:
        super().__init__("thread busy")
        self.running = running


def _rows(rows: list[Any]) -> str:
    """Many rows as one JSON parameter, unpacked by ``jsonb_array_elements`` in SQL: one
    statement however many rows (each statement costs psycopg and the server far more than a
    few more bytes of JSON)."""
    return _dumps(rows)


def _as_one_statement(parts: list[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    ctes = ", ".join(f"w{i} AS ({part})" for i, part in enumerate(parts))
    return f"WITH {ctes} SELECT 1"


async def _supersede(
    cur: Any, thread_pk: int, incoming: list[str], *, supersede: bool, restore: Sequence[str]
) -> None:
    """The client no longer sends some stored messages (a regenerate, an edit, a deletion):
    they are superseded, kept for the record; ones it sends again (``restore``) are current
    again. Rare: a history that extends what is stored touches nothing here."""
    if supersede:
        await cur.execute(
            f"UPDATE {MESSAGE} SET superseded = true WHERE thread_id = %s AND NOT superseded"
            " AND kind <> %s AND NOT (message_id = ANY(%s))",
            (thread_pk, str(MessageKind.AGENT_STATE), incoming),
        )
    if restore:
        await cur.execute(
            f"UPDATE {MESSAGE} SET superseded = false WHERE thread_id = %s"
            " AND message_id = ANY(%s)",
            (thread_pk, list(restore)),
        )


def _new_message_rows(
    first_of: dict[str, Any], missing: Sequence[str], last_position: int, now: dt.datetime
) -> list[tuple[Any, ...]]:
    """Rows for the messages the thread does not hold yet (``missing``, ids of ``first_of``'s
    messages, which are in the history's order), after ``last_position``. Only the missing
    ones are looked at: a continued thread's history is mostly stored already."""
    wanted = set(missing)
    found: list[Any] = []
    if wanted:
        # From the end, where a continued thread's new messages are, to the earliest missing.
        for message_id in reversed(first_of):
            if message_id in wanted:
                found.append(first_of[message_id])
                if len(found) == len(wanted):
                    break
        found.reverse()
    rows = []
    position = last_position
    for m in found:
        position += 1
        arguments = m.agent_state if m.kind == MessageKind.AGENT_STATE else m.arguments
        rows.append(
            (
                position,
                m.id,
                m.kind,
                m.role,
                m.content,
                m.action_name,
                arguments,
                m.parent_message_id,
                m.action_execution_id,
                m.result,
                m.image_format,
                m.image_bytes,
                "success",
                "",
                m.created_at or now,
            )
        )
    return rows


# --- the statements ---------------------------------------------------------------------------

_RACED = frozenset({"run_one_active_per_thread", "message_unique_id", "message_unique_position"})

# x.e: a LookUp, [thread_id, owner_id, agent_name, ids, state_of, now]. Several turns' look-ups
# in one statement (grouped.py): each statement costs the runtime a send and PostgreSQL a
# round of its protocol, far more than a few more rows. The kinds and statuses are literals,
# so that a generic plan can use the partial indexes they match.
_LOOK_THREADS = f"""
WITH asked AS (
    SELECT x.n, x.e->>0 AS thread_id, (x.e->>1)::bigint AS owner_id, x.e->>2 AS agent_name,
        x.e->3 AS ids, x.e->>4 AS state_of, (x.e->>5)::timestamptz AS now
    FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS x(e, n)
), known AS (
    -- Each turn's thread: the caller's own of that id (ids are unique per owner, anonymous
    -- callers sharing one namespace: migration 0012), a probe of thread_unique_per_owner,
    -- which leads with the id (LIMIT 1: the planner does not flatten a subquery with a limit
    -- into a join over the whole table).
    SELECT a.*, th.id, th.owner_id AS stored_owner, th.title, th.history_version
    FROM asked a LEFT JOIN LATERAL (
        SELECT id, owner_id, title, history_version FROM {THREAD}
        WHERE thread_id = a.thread_id AND owner_id IS NOT DISTINCT FROM a.owner_id LIMIT 1
    ) th ON true
), created AS (
    -- Only threads not there yet: for an existing one, the insert's check of the unique
    -- index would wait for any write in flight on its row (a run's end, say).
    -- No conflict target: a thread conflicts on thread_unique_per_owner, or on
    -- thread_unique_anonymous for anonymous callers (NULLs are distinct in the first).
    INSERT INTO {THREAD} (thread_id, owner_id, agent_name, title, metadata, status,
                          created_at, updated_at)
    SELECT DISTINCT ON (thread_id, owner_id) thread_id, owner_id, agent_name, '', '{{}}',
        '{ThreadStatus.IDLE.value}', now, now
    FROM known WHERE id IS NULL ORDER BY thread_id, owner_id, n
    ON CONFLICT DO NOTHING
    RETURNING id, thread_id, owner_id, title, history_version
), t AS (
    -- A thread this statement created is not in its own snapshot of the table: from created.
    SELECT k.n, k.ids, k.state_of, coalesce(k.id, c.id) AS id,
        CASE WHEN k.id IS NULL THEN c.owner_id ELSE k.stored_owner END AS owner_id,
        coalesce(k.title, c.title) AS title,
        coalesce(k.history_version, c.history_version) AS history_version
    FROM known k LEFT JOIN created c ON k.id IS NULL AND c.thread_id = k.thread_id
        AND c.owner_id IS NOT DISTINCT FROM k.owner_id
)
SELECT t.n, t.id, t.owner_id, t.title,
    (SELECT json_agg(json_build_array(r.id, r.status)) FROM {RUN} r
      WHERE r.thread_id = t.id
        AND r.status IN ('{RunStatus.PENDING.value}', '{RunStatus.RUNNING.value}')),
    found.missing,
    json_build_array(found.current_sent, found.restore),
    -- The thread's messages set aside (superseded, agent states), in their partial index
    -- message_set_aside: with the last position, a bound on its current messages that never
    -- reads them.
    (SELECT count(*) FROM {MESSAGE} m
      WHERE m.thread_id = t.id AND (m.superseded OR m.kind = '{MessageKind.AGENT_STATE.value}')),
    (SELECT max(m.position) FROM {MESSAGE} m WHERE m.thread_id = t.id),
    (SELECT s.state FROM {AGENT_STATE} s WHERE s.thread_id = t.id AND s.agent_name = t.state_of
      ORDER BY s.id DESC LIMIT 1),
    t.history_version
FROM t
"""


def _found(join: str, *, matched: str) -> str:
    """The carried ids against the thread's messages (``m``, joined by ``join``; ``matched``:
    not null where an id matched): the missing ones, the current ones' count, the superseded
    ones."""
    return f"""
CROSS JOIN LATERAL (
    SELECT json_agg(sent.message_id) FILTER (WHERE {matched} IS NULL) AS missing,
        count({matched}) FILTER (
            WHERE NOT m.superseded AND m.kind <> '{MessageKind.AGENT_STATE.value}'
        ) AS current_sent,
        json_agg(sent.message_id) FILTER (WHERE m.superseded) AS restore
    FROM jsonb_array_elements_text(t.ids) AS sent(message_id)
    {join}
) found
"""


# Each id a look-up carries, probed in the thread's messages (message_unique_id: at most one
# row). A continued thread asks about its new messages alone (``KNOWN``); joined with them
# instead, in the generic plan (which takes the ids for a hundred), PostgreSQL read every
# message of the thread to match one or two: slower for every length of thread.
_FOUND_PROBED = _found(
    f"""LEFT JOIN LATERAL (
        SELECT true AS found, s.superseded, s.kind FROM {MESSAGE} s
        WHERE s.thread_id = t.id AND s.message_id = sent.message_id LIMIT 1
    ) m ON true""",
    matched="m.found",
)
# The ids matched with the thread's messages in one pass over each, for a look-up carrying
# many (a history read whole: a thread this process has not seen, a reload): probing each
# costs more there. (A semi join was once planned comparing every message with every id:
# quadratic in the thread's length.)
_FOUND_JOINED = _found(
    f"LEFT JOIN {MESSAGE} m ON m.thread_id = t.id AND m.message_id = sent.message_id",
    matched="m.id",
)
# Up to this many ids in each look-up of a statement, they are probed.
PROBED_IDS = 32
_LOOK_PROBED = _LOOK_THREADS + _FOUND_PROBED + "WHERE t.id IS NOT NULL"
_LOOK_JOINED = _LOOK_THREADS + _FOUND_JOINED + "WHERE t.id IS NOT NULL"


class TurnWrite(NamedTuple):
    run: list[Any]
    messages: list[tuple[Any, ...]]
    thread: list[Any]


# e: [id, thread, agent_name, protocol, request_type, previous_run_id, status, created_at,
#     started_at, heartbeat_at, request_payload, attempts]
_INSERT_RUNS = (
    f"INSERT INTO {RUN} (id, thread_id, agent_name, protocol, request_type, previous_run_id,"
    " status, error_code, error_details, limit_trips, model, input_tokens, output_tokens,"
    " cached_input_tokens, reasoning_tokens, cost, created_at, started_at, heartbeat_at,"
    " request_payload, cancel_requested, attempts)"
    " SELECT e->>0, (e->>1)::bigint, e->>2, e->>3, e->>4, e->>5, e->>6, '', NULL, '[]', '', 0,"
    " 0, 0, 0, NULL, (e->>7)::timestamptz, (e->>8)::timestamptz, (e->>9)::timestamptz,"
    " NULLIF(e->10, 'null'::jsonb), false, (e->>11)::int FROM jsonb_array_elements(%s::jsonb) e"
)
# e: [position, message_id, kind, role, content, action_name, arguments, parent_message_id,
#     action_execution_id, result, image_format, image_bytes, status, status_reason, created_at,
#     thread, run]
_INSERT_MESSAGES = (
    f"INSERT INTO {MESSAGE} (thread_id, position, message_id, kind, role, content, action_name,"
    " arguments, parent_message_id, action_execution_id, result, image_format, image_bytes,"
    " status, status_reason, superseded, run_id, created_at)"
    " SELECT (e->>15)::bigint, (e->>0)::int, e->>1, e->>2, e->>3, e->>4, e->>5,"
    " NULLIF(e->6, 'null'::jsonb), e->>7, e->>8, e->>9, e->>10, e->>11, e->>12, e->>13, false,"
    " e->>16, (e->>14)::timestamptz FROM jsonb_array_elements(%s::jsonb) e"
)
# e: [thread, status, updated_at, title (empty: unchanged)]. The ids again as an array: the
# planner then finds the rows by key (see pg_progress.py).
_UPDATE_THREADS = (
    f"UPDATE {THREAD} t SET status = e->>1, updated_at = (e->>2)::timestamptz,"
    " title = CASE WHEN e->>3 <> '' THEN e->>3 ELSE t.title END"
    " FROM jsonb_array_elements(%s::jsonb) e"
    " WHERE t.id = (e->>0)::bigint"
    " AND t.id = ANY(ARRAY(SELECT (x->>0)::bigint FROM jsonb_array_elements(%s::jsonb) x))"
)
_WRITE_TURNS = f"WITH runs AS ({_INSERT_RUNS}), messages AS ({_INSERT_MESSAGES}) {_UPDATE_THREADS}"


def turn_writes_statement(writes: Sequence[TurnWrite]) -> tuple[str, list[str]]:
    """The one statement writing ``writes``, and its parameters."""
    threads = _rows([write.thread for write in writes])
    return _WRITE_TURNS, [
        _rows([write.run for write in writes]),
        _rows([row for write in writes for row in write.messages]),
        threads,
        threads,
    ]


async def _write_turns(writes: Sequence[TurnWrite]) -> None:
    """The turns' writes in ONE statement, atomic as a whole. psycopg's errors are left as
    they are: the caller tells a raced write by its constraint."""
    pool = await POOLS.get()
    async with pool.connection() as conn:
        await conn.execute(*turn_writes_statement(writes))


_turn_writes: PerLoop[Grouped[TurnWrite]] = PerLoop(lambda: Grouped(_write_turns, at_once=True))
