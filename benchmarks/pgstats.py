"""Database-wide PostgreSQL counters (``pg_stat_database``), sampled around a window.

Sessions (connections opened, PostgreSQL 14+), transactions and rows written per request say
how chatty the server is with its database. A sample opens its own short connection (one
session, counted; negligible against thousands of requests). Backends publish their counters
at transaction end or exit, at most about once a second while busy, so a window's figures can
lag by up to a second's worth of work.
"""

from __future__ import annotations

import psycopg

_QUERY = """
    SELECT sessions, xact_commit + xact_rollback, tup_inserted, tup_updated, tup_deleted
    FROM pg_stat_database WHERE datname = current_database()
"""
COUNTERS = ("sessions", "transactions", "rows_inserted", "rows_updated", "rows_deleted")


def database_counters(database_url: str) -> dict[str, int] | None:
    """The counters now, or None when they cannot be read (old server, no rights)."""
    try:
        with psycopg.connect(database_url, autocommit=True, connect_timeout=5) as connection:
            row = connection.execute(_QUERY).fetchone()
    except psycopg.Error:
        return None
    if row is None:
        return None
    return {name: int(value or 0) for name, value in zip(COUNTERS, row, strict=True)}
