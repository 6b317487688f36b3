"""A small async connection pool for the turn's statements.

psycopg_pool's ``AsyncConnectionPool`` checks, resets and hands over connections through
conditions and background tasks; under many concurrent conversations that bookkeeping cost the
server more CPU than the statements it served. A turn's needs are simpler:
autocommit connections, a bound on how many exist, a bounded wait for one, and never reusing
one that is broken or left inside a transaction, and a statement run once on each new
connection to set its session up. That is all this does.

An idle connection whose server ended the session (a restart, a failover,
``pg_terminate_backend``) is found before it is handed out: its socket has become readable
(``conversations/store/health.py``), and it is replaced by a new one, so no statement is lost
to a session that died while it waited here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import psycopg
from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus

from conversations.store.health import peer_closed

# Closings under way: the loop keeps only weak references to its tasks.
_CLOSING: set[asyncio.Task[None]] = set()


def _close_soon(conn: AsyncConnection) -> None:
    closing = asyncio.get_running_loop().create_task(conn.close())
    _CLOSING.add(closing)
    closing.add_done_callback(_CLOSING.discard)


class PoolTimeout(psycopg.OperationalError):
    """No connection became free within the pool's timeout."""


class TurnPool:
    def __init__(
        self, conninfo: str, *, max_size: int, timeout: float, session_setup: str = ""
    ) -> None:
        self._conninfo = conninfo
        self._session_setup = session_setup
        self._timeout = timeout
        self._slots = asyncio.Semaphore(max_size)
        self._idle: list[AsyncConnection] = []
        self._closed = False

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection]:
        if self._slots.locked():
            try:
                await asyncio.wait_for(self._slots.acquire(), self._timeout)
            except TimeoutError:
                raise PoolTimeout(
                    f"no database connection became free within {self._timeout:g} s"
                ) from None
        else:
            # A free slot is taken at once. wait_for would first wrap the acquisition in a
            # task of its own (before Python 3.12), a turn of the loop later, before each
            # statement.
            await self._slots.acquire()
        conn: AsyncConnection | None = None
        try:
            conn = self._take_idle() or await self._connect()
            yield conn
        finally:
            if conn is not None:
                self._give_back(conn)
            self._slots.release()

    def _take_idle(self) -> AsyncConnection | None:
        """The most recently used idle connection whose session is still open; the ones the
        server ended meanwhile are closed on the way."""
        while self._idle:
            conn = self._idle.pop()
            try:
                ended = conn.closed or peer_closed(conn.fileno())
            except psycopg.Error:
                ended = True
            if not ended:
                return conn
            _close_soon(conn)
        return None

    async def _connect(self) -> AsyncConnection:
        conn = await AsyncConnection.connect(self._conninfo, autocommit=True)
        if self._session_setup:
            try:
                await conn.execute(self._session_setup)
            except BaseException:
                await conn.close()
                raise
        return conn

    def _give_back(self, conn: AsyncConnection) -> None:
        reusable = (
            not self._closed
            and not conn.closed
            and conn.info.transaction_status == TransactionStatus.IDLE
        )
        if reusable:
            self._idle.append(conn)
        else:
            # Broken, or left inside a (failed) transaction: never handed out again.
            _close_soon(conn)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()
