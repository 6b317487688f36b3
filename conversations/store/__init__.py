"""The turn's storage path: what one run writes, in as few round trips as the database allows.

Two implementations behind one small interface (``TurnStore``):

- ``PgTurnStore`` (``pg/``): raw SQL on psycopg's async connection pool, for PostgreSQL. A
  request takes a connection only for the statements it runs, never while the model streams,
  and pays no thread hop: this is where the hot path's time went with the ORM (a
  ``sync_to_async`` hop and query compilation per statement, ~26 statements per turn).
- ``OrmTurnStore`` (``orm.py``): the ORM services, for every other database (the embedded
  SQLite default), called on one thread so that SQLite's single writer is never contended.

Everything off the hot path (admin, threads API, reaper, retention) keeps using the ORM; the
tests read back through the ORM exactly what ``PgTurnStore`` wrote.
"""

from __future__ import annotations

from functools import cache

from django.conf import settings

from conversations.store.types import PreparedTurn, TurnStore

__all__ = ["PreparedTurn", "TurnStore", "turn_store", "turn_store_close"]


@cache
def _store_for(kind: str) -> TurnStore:
    if kind == "auto" and settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        from conversations.store.pg.store import PgTurnStore

        return PgTurnStore()
    from conversations.store.orm import OrmTurnStore

    return OrmTurnStore()


def turn_store() -> TurnStore:
    """The store for the default database (``TURN_STORE``: ``auto`` or ``orm``)."""
    from copilot_runtime.conf import runtime_setting

    return _store_for(str(runtime_setting("TURN_STORE")).strip().lower())


async def turn_store_close() -> None:
    """Close the connection pools the PostgreSQL store opened on this event loop (at
    shutdown; the next turn would open new ones)."""
    import sys

    pools = sys.modules.get("conversations.store.pg.pools")
    if pools is not None:  # never imported: no pool was ever opened
        await pools.POOLS.close_all()
