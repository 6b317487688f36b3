"""The store's connection pools: one per event loop, on Django's default database, each new
connection's session set up for the store's statements (``SESSION_SETUP``)."""

from __future__ import annotations

import asyncio

from django.db import connections
from psycopg.conninfo import make_conninfo

from conversations.store.pool import TurnPool

# Run once on each new connection of these pools, and on no other connection (Django's own
# keep the planner's defaults). Every statement of the store finds its rows by key: the look-up
# probes the turn's thread and the ids it carries, the turn's write and a run's progress update
# the rows they name. psycopg prepares a statement on its fifth run, and PostgreSQL then keeps
# one generic plan for it, made for the tables as they were. On a new site they are nearly
# empty, a sequential scan is cheapest, and nothing replans the statement before an ANALYZE
# (autovacuum's first comes a minute or more later): meanwhile each run's end read the whole
# runs table, and each turn's write the whole threads table, a cost growing with the site. Even
# with fresh statistics, the grouped look-up's generic plan scanned a small site's threads and
# a long thread's messages. With sequential scans priced out, each plan takes the index its
# statement was written for, whatever the statistics say. Scoping it to some statements with a
# SET LOCAL would wrap each of them in a transaction of its own, with round trips of their own,
# on autocommit connections that run nothing else. The plan tests of
# tests/conversations/store/test_pg_store.py (the look-up's, the turn write's, the run end's)
# fail without it.
SESSION_SETUP = "SET enable_seqscan = off"


def conninfo() -> str:
    """The connection string of Django's default database, for psycopg."""
    params = dict(connections["default"].get_connection_params())
    for key in ("context", "cursor_factory", "prepare_threshold", "server_side_binding"):
        params.pop(key, None)
    return make_conninfo(**{k: v for k, v in params.items() if v not in (None, "")})


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
            conninfo(),
            max_size=int(runtime_setting("DATABASE_ASYNC_POOL_MAX")),
            timeout=float(runtime_setting("DATABASE_WAIT_SECONDS")),
            session_setup=SESSION_SETUP,
        )
        self._pools[id(loop)] = (loop, pool)
        return pool

    async def close_all(self) -> None:
        """Close the pools opened on the running loop (at its shutdown)."""
        loop = asyncio.get_running_loop()
        for key, (pool_loop, pool) in list(self._pools.items()):
            if pool_loop is loop:
                await pool.close()
                del self._pools[key]


POOLS = _Pools()
