"""The turn's storage path in raw SQL on PostgreSQL (psycopg's async pool, no thread hop).

The only raw SQL of the app, kept in this module and tested against the ORM
(tests/conversations/store/): each function writes exactly the rows the ORM services write
(``conversations/services``), with the same defaults. A turn costs:

- prepare: one transaction of a few statements (thread upsert and lock, busy check, a lookup of
  only the message ids the request carries, the run, the new messages, the latest state);
- each log batch: one transaction, pipelined (events, finished messages, states, the run's end);
- the spans: one transaction at the end.

A connection is held only while those statements run, never while the model streams, so the
pool's size bounds concurrent statements, not concurrent conversations.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from decimal import Decimal
from typing import Any

import orjson
import psycopg
from asgiref.sync import sync_to_async
from django import db as django_db
from django.db import connections
from django.utils import timezone
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from conversations.models import MessageKind, RunStatus, ThreadStatus
from conversations.services.messages import _NOT_STORED_ROLES
from conversations.services.runs import ThreadBusy
from conversations.services.threads import ThreadNotAvailable, title_from_text
from conversations.store.types import PreparedTurn, Progress, Reap, TurnRecord

logger = logging.getLogger(__name__)

THREAD = "conversations_thread"
MESSAGE = "conversations_message"
RUN = "conversations_run"
RUN_EVENT = "conversations_runevent"
AGENT_STATE = "conversations_agentstate"
SPAN = "conversations_span"

_ACTIVE = (str(RunStatus.PENDING), str(RunStatus.RUNNING))
_PRICES_TTL_SECONDS = 30.0


def _dumps(value: Any) -> str:
    # Django's JSONField writes with json.dumps; orjson writes the same JSON for the values
    # the runtime stores (it also accepts non-str keys, as json does, when told to).
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def _json(value: Any) -> Jsonb | None:
    return None if value is None else Jsonb(value, dumps=_dumps)


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


class _Pools:
    """One async pool per event loop (a pool is bound to the loop that opened it)."""

    def __init__(self) -> None:
        self._pools: dict[int, tuple[asyncio.AbstractEventLoop, AsyncConnectionPool]] = {}
        self._lock: asyncio.Lock | None = None

    async def get(self) -> AsyncConnectionPool:
        loop = asyncio.get_running_loop()
        entry = self._pools.get(id(loop))
        if entry is not None and entry[0] is loop:
            return entry[1]
        from copilot_runtime.conf import runtime_setting

        pool = AsyncConnectionPool(
            _conninfo(),
            min_size=int(runtime_setting("DATABASE_ASYNC_POOL_MIN")),
            max_size=int(runtime_setting("DATABASE_ASYNC_POOL_MAX")),
            timeout=float(runtime_setting("DATABASE_WAIT_SECONDS")),
            open=False,
            name="copilot-turns",
        )
        self._pools[id(loop)] = (loop, pool)
        await pool.open(wait=False)
        return pool

    async def close_all(self) -> None:
        loop = asyncio.get_running_loop()
        for key, (pool_loop, pool) in list(self._pools.items()):
            if pool_loop is loop:
                await pool.close()
                del self._pools[key]


POOLS = _Pools()


class PgTurnStore:
    def __init__(self) -> None:
        self._prices: tuple[float, dict[str, Any]] | None = None

    async def _connection(self) -> Any:
        pool = await POOLS.get()
        return pool.connection()

    # --- prepare ------------------------------------------------------------------------------

    async def prepare(self, *, turn: TurnRecord, reap: Reap) -> PreparedTurn:
        try:
            try:
                return await self._prepare(turn)
            except _Busy as busy:
                # Reaped outside the transaction: the reaper updates the thread row we held.
                if busy.running and await sync_to_async(reap)(busy.running):
                    return await self._prepare(turn)
                raise ThreadBusy(turn.thread_id) from None
        except psycopg.Error as exc:
            raise _translate(exc) from exc
        except PoolTimeout as exc:
            raise django_db.OperationalError(str(exc)) from exc

    async def _prepare(self, turn: TurnRecord) -> PreparedTurn:
        now = timezone.now()
        user = turn.user
        owner_id = user.pk if user.is_authenticated else None
        history = [
            m for m in turn.messages if not (m.kind == "text" and m.role in _NOT_STORED_ROLES)
        ]
        async with await self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            # Created on first use; the row stays locked until the run exists, so two
            # requests on one thread are serialised (the ON CONFLICT branch locks it too).
            await cur.execute(
                f"INSERT INTO {THREAD} (thread_id, owner_id, agent_name, title, metadata,"
                " status, created_at, updated_at) VALUES (%s, %s, %s, '', '{}', %s, %s, %s)"
                " ON CONFLICT (thread_id) DO UPDATE SET thread_id = EXCLUDED.thread_id"
                " RETURNING id, owner_id, title",
                (turn.thread_id, owner_id, turn.agent_name, str(ThreadStatus.IDLE), now, now),
            )
            thread_pk, stored_owner, title = await cur.fetchone()
            visible = (
                stored_owner is None and not user.is_authenticated
                if stored_owner is None
                else user.is_authenticated and stored_owner == user.pk
            )
            if not visible:
                raise ThreadNotAvailable()
            await cur.execute(
                f"SELECT id, status FROM {RUN} WHERE thread_id = %s AND status = ANY(%s)",
                (thread_pk, list(_ACTIVE)),
            )
            active = await cur.fetchall()
            if active:
                raise _Busy([pk for pk, status in active if status == RunStatus.RUNNING])

            await cur.execute(
                f"INSERT INTO {RUN} (id, thread_id, agent_name, protocol, request_type,"
                " previous_run_id, status, error_code, error_details, limit_trips, model,"
                " input_tokens, output_tokens, cached_input_tokens, reasoning_tokens, cost,"
                " created_at, request_payload, cancel_requested, attempts)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, '', NULL, '[]', '', 0, 0, 0, 0, NULL,"
                " %s, %s, false, 0)",
                (
                    turn.run_id,
                    thread_pk,
                    turn.agent_name,
                    turn.protocol,
                    turn.request_type,
                    turn.previous_run_id or "",
                    str(RunStatus.PENDING),
                    now,
                    _json(turn.request_payload),
                ),
            )
            new_ids = await _sync_history(cur, thread_pk, history, turn.run_id, now)

            new_title = ""
            if not title:
                first_user = next(
                    (m for m in history if m.kind == "text" and m.role == "user"), None
                )
                if first_user is not None and first_user.content.strip():
                    new_title = title_from_text(first_user.content)
            await cur.execute(
                f"UPDATE {THREAD} SET status = %s, updated_at = %s,"
                " title = CASE WHEN %s <> '' THEN %s ELSE title END WHERE id = %s",
                (str(ThreadStatus.RUNNING), now, new_title, new_title, thread_pk),
            )
            latest: dict[str, Any] | None = None
            if turn.want_state:
                await cur.execute(
                    f"SELECT state FROM {AGENT_STATE} WHERE thread_id = %s AND agent_name = %s"
                    " ORDER BY id DESC LIMIT 1",
                    (thread_pk, turn.agent_name),
                )
                row = await cur.fetchone()
                latest = dict(row[0]) if row is not None and isinstance(row[0], dict) else None
        return PreparedTurn(
            run_id=turn.run_id,
            thread_id=turn.thread_id,
            thread_pk=thread_pk,
            latest_state=latest,
            new_message_ids=tuple(new_ids),
        )

    # --- the run's life -----------------------------------------------------------------------

    async def keep_request(self, *, run_id: str, payload: dict[str, Any]) -> None:
        try:
            async with await self._connection() as conn:
                await conn.execute(
                    f"UPDATE {RUN} SET request_payload = %s WHERE id = %s",
                    (_json(payload), run_id),
                )
        except psycopg.Error as exc:
            raise _translate(exc) from exc
        except PoolTimeout as exc:
            raise django_db.OperationalError(str(exc)) from exc

    async def mark_running(self, *, run_id: str, model: str) -> bool:
        now = timezone.now()
        try:
            async with await self._connection() as conn:
                cur = await conn.execute(
                    f"UPDATE {RUN} SET status = %s, started_at = %s, heartbeat_at = %s,"
                    " model = %s, attempts = attempts + 1 WHERE id = %s AND status = %s",
                    (str(RunStatus.RUNNING), now, now, model, run_id, str(RunStatus.PENDING)),
                )
                return cur.rowcount > 0
        except psycopg.Error as exc:
            raise _translate(exc) from exc
        except PoolTimeout as exc:
            raise django_db.OperationalError(str(exc)) from exc

    async def heartbeat(self, *, run_id: str) -> bool:
        try:
            async with await self._connection() as conn:
                cur = await conn.execute(
                    f"UPDATE {RUN} SET heartbeat_at = %s WHERE id = %s RETURNING cancel_requested",
                    (timezone.now(), run_id),
                )
                row = await cur.fetchone()
                return bool(row and row[0])
        except psycopg.Error as exc:
            raise _translate(exc) from exc
        except PoolTimeout as exc:
            raise django_db.OperationalError(str(exc)) from exc

    async def record(self, *, run_id: str, thread_pk: int | None, progress: Progress) -> None:
        try:
            async with await self._connection() as conn, conn.transaction():
                await _record(conn, run_id, thread_pk, progress)
        except psycopg.Error as exc:
            raise _translate(exc) from exc
        except PoolTimeout as exc:
            raise django_db.OperationalError(str(exc)) from exc

    async def store_trace(
        self, *, run_id: str, trace_id: str, records: list[Any], persist_spans: bool
    ) -> Decimal | None:
        from copilot_runtime.tracing.store import spans_price, when

        cost = spans_price(records=records, prices=await self._model_prices())
        rows = [
            (
                trace_id,
                r.span_id,
                r.parent_span_id,
                run_id,
                r.kind,
                r.name[:255],
                _json(r.input),
                _json(r.output),
                _json(r.attributes),
                r.is_error,
                r.is_complete,
                when(r.started_at),
                when(r.ended_at),
            )
            for r in records
        ]
        try:
            async with await self._connection() as conn, conn.transaction(), conn.cursor() as cur:
                if persist_spans and rows:
                    await cur.executemany(
                        f"INSERT INTO {SPAN} (trace_id, span_id, parent_span_id, run_id, kind,"
                        " name, input, output, attributes, is_error, is_complete, started_at,"
                        " ended_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        rows,
                    )
                if cost is not None:
                    await cur.execute(f"UPDATE {RUN} SET cost = %s WHERE id = %s", (cost, run_id))
        except psycopg.Error as exc:
            raise _translate(exc) from exc
        return cost

    async def _model_prices(self) -> dict[str, Any]:
        """The price table, re-read at most every 30 s (an admin edit applies within that)."""
        cached = self._prices
        if cached is not None and time.monotonic() - cached[0] < _PRICES_TTL_SECONDS:
            return cached[1]
        from copilot_runtime.tracing.cost import prices_load

        prices = await sync_to_async(prices_load)()
        self._prices = (time.monotonic(), prices)
        return prices


class _Busy(Exception):
    def __init__(self, running: list[str]) -> None:
        super().__init__("thread busy")
        self.running = running


async def _sync_history(
    cur: Any, thread_pk: int, history: list[Any], run_id: str, now: dt.datetime
) -> list[str]:
    """``messages_sync_input`` in SQL, reading only the ids the request carries (plus two
    aggregates) instead of the whole thread: the common case, a history that extends what is
    stored, costs the same on the 120th turn as on the 2nd."""
    for message in history:
        if not message.id:
            import uuid

            message.id = f"ck-{uuid.uuid4()}"
    incoming = list(dict.fromkeys(m.id for m in history))
    await cur.execute(
        f"SELECT message_id, superseded, kind FROM {MESSAGE}"
        " WHERE thread_id = %s AND message_id = ANY(%s)",
        (thread_pk, incoming),
    )
    found = {
        message_id: (superseded, kind) for message_id, superseded, kind in await cur.fetchall()
    }
    await cur.execute(
        f"SELECT count(*) FILTER (WHERE NOT superseded AND kind <> %s), max(position)"
        f" FROM {MESSAGE} WHERE thread_id = %s",
        (str(MessageKind.AGENT_STATE), thread_pk),
    )
    current_count, last_position = await cur.fetchone()
    current_sent = sum(
        1
        for superseded, kind in found.values()
        if not superseded and kind != MessageKind.AGENT_STATE
    )
    if current_sent != current_count:
        # The client no longer sends some stored messages (a regenerate, an edit, a deletion):
        # they are superseded, kept for the record.
        await cur.execute(
            f"UPDATE {MESSAGE} SET superseded = true WHERE thread_id = %s AND NOT superseded"
            " AND kind <> %s AND NOT (message_id = ANY(%s))",
            (thread_pk, str(MessageKind.AGENT_STATE), incoming),
        )
    restore = [message_id for message_id, (superseded, _) in found.items() if superseded]
    if restore:
        await cur.execute(
            f"UPDATE {MESSAGE} SET superseded = false WHERE thread_id = %s"
            " AND message_id = ANY(%s)",
            (thread_pk, restore),
        )
    position = -1 if last_position is None else last_position
    rows = []
    seen = set(found)
    for m in history:
        if m.id in seen:
            continue
        seen.add(m.id)
        position += 1
        arguments = m.agent_state if m.kind == MessageKind.AGENT_STATE else m.arguments
        rows.append(
            (
                thread_pk,
                position,
                m.id,
                m.kind,
                m.role,
                m.content,
                m.action_name,
                _json(arguments),
                m.parent_message_id,
                m.action_execution_id,
                m.result,
                m.image_format,
                m.image_bytes,
                "success",
                "",
                False,
                run_id,
                m.created_at or now,
            )
        )
    if rows:
        await cur.executemany(_INSERT_MESSAGE, rows)
    return [row[2] for row in rows]


_INSERT_MESSAGE = (
    f"INSERT INTO {MESSAGE} (thread_id, position, message_id, kind, role, content, action_name,"
    " arguments, parent_message_id, action_execution_id, result, image_format, image_bytes,"
    " status, status_reason, superseded, run_id, created_at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


async def _record(conn: Any, run_id: str, thread_pk: int | None, progress: Progress) -> None:
    now = timezone.now()
    async with conn.cursor() as cur:
        if progress.events:
            await cur.executemany(
                f"INSERT INTO {RUN_EVENT} (run_id, seq, type, payload, created_at)"
                " VALUES (%s, %s, %s, %s, %s)",
                [(run_id, e.seq, e.type, _json(e.payload), now) for e in progress.events],
            )
        if (progress.messages or progress.agent_states) and thread_pk is None:
            await cur.execute(f"SELECT thread_id FROM {RUN} WHERE id = %s", (run_id,))
            thread_pk = (await cur.fetchone())[0]
        if progress.messages:
            ids = [m.message_id for m in progress.messages]
            await cur.execute(
                f"SELECT message_id FROM {MESSAGE} WHERE thread_id = %s AND message_id = ANY(%s)",
                (thread_pk, ids),
            )
            existing = {row[0] for row in await cur.fetchall()}
            await cur.execute(
                f"SELECT max(position) FROM {MESSAGE} WHERE thread_id = %s", (thread_pk,)
            )
            last = (await cur.fetchone())[0]
            position = -1 if last is None else last
            rows = []
            for m in progress.messages:
                if m.message_id in existing:
                    continue
                position += 1
                rows.append(
                    (
                        thread_pk,
                        position,
                        m.message_id,
                        m.kind,
                        m.role,
                        m.content,
                        m.action_name,
                        _json(m.arguments),
                        m.parent_message_id,
                        m.action_execution_id,
                        m.result,
                        "",
                        "",
                        m.status,
                        m.status_reason,
                        False,
                        run_id,
                        m.created_at,
                    )
                )
            if rows:
                await cur.executemany(_INSERT_MESSAGE, rows)
        if progress.agent_states:
            await cur.executemany(
                f"INSERT INTO {AGENT_STATE} (thread_id, agent_name, state, config, node_name,"
                " run_id, active, running, created_at) VALUES (%s, %s, %s, '{}', %s, %s, %s, %s,"
                " %s)",
                [
                    (
                        thread_pk,
                        s["agent_name"],
                        _json(s["state"]),
                        s["node_name"],
                        s["run_id"],
                        s["active"],
                        s["running"],
                        now,
                    )
                    for s in progress.agent_states
                ],
            )
        if progress.first_token_at is not None:
            await cur.execute(
                f"UPDATE {RUN} SET first_token_at = %s WHERE id = %s",
                (progress.first_token_at, run_id),
            )
        outcome = progress.outcome
        if outcome is not None:
            status = str(outcome.status)
            paused = progress.interrupted and status == RunStatus.SUCCEEDED
            if paused or status == RunStatus.INTERRUPTED:
                status, thread_status = str(RunStatus.INTERRUPTED), str(ThreadStatus.INTERRUPTED)
            else:
                thread_status = str(ThreadStatus.IDLE)
            usage = outcome.usage
            trips = ", limit_trips = %s" if outcome.limit_trips else ""
            params: list[Any] = [
                status,
                outcome.error_code,
                _json(outcome.error_details),
                now,
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_input_tokens,
                usage.reasoning_tokens,
            ]
            if outcome.limit_trips:
                params.append(_json(outcome.limit_trips))
            params.append(run_id)
            await cur.execute(
                f"UPDATE {RUN} SET status = %s, error_code = %s, error_details = %s,"
                " finished_at = %s, input_tokens = input_tokens + %s,"
                " output_tokens = output_tokens + %s,"
                " cached_input_tokens = cached_input_tokens + %s,"
                f" reasoning_tokens = reasoning_tokens + %s{trips} WHERE id = %s"
                " RETURNING thread_id",
                params,
            )
            row = await cur.fetchone()
            if row is not None:
                await cur.execute(
                    f"UPDATE {THREAD} SET status = %s, updated_at = %s WHERE id = %s",
                    (thread_status, now, row[0]),
                )
