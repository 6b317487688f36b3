"""``PgTurnStore``: the turn's storage path (``TurnStore``) in raw SQL on PostgreSQL.

A turn's preparation is ``prepare.py``'s; what a run writes as it goes is ``progress.py``'s
statement; the rest of a run's life (its start, its heartbeats, reading its log) is a short
statement each, here. psycopg's errors reach callers as Django's (``errors.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from django.utils import timezone

from conversations.models import RunStatus
from conversations.services.runs import LoggedEvent
from conversations.store.pg.errors import translate
from conversations.store.pg.pools import POOLS
from conversations.store.pg.prepare import prepare_turn
from conversations.store.pg.progress import progress_statement
from conversations.store.pg.tables import RUN, RUN_EVENT
from conversations.store.types import (
    PreparedTurn,
    Progress,
    Reap,
    RunProgress,
    SpanWrite,
    TurnRecord,
)


class PgTurnStore:
    """The ``TurnStore`` of a PostgreSQL default database (see ``conversations/store/types.py``
    for what each method promises)."""

    async def prepare(self, *, turn: TurnRecord, reap: Reap) -> PreparedTurn:
        return await prepare_turn(turn, reap)

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
        a whole: see progress.py."""
        statement = progress_statement(entries, now=timezone.now())
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
        """One statement on a connection of the loop's pool: its first row (``fetch``), all
        of them (``many``) or nothing."""
        try:
            pool = await POOLS.get()
            async with pool.connection() as conn:
                cur = await conn.execute(sql, params)
                if many:
                    return await cur.fetchall()
                return await cur.fetchone() if fetch else None
        except psycopg.Error as exc:
            raise translate(exc) from exc
