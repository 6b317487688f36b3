"""A PostgreSQL database of a test's own on the suite's server (``DATABASE_URL``), for a host
project that migrates and serves its own (tests/e2e/test_host_project.py, test_host_entry.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg

from tests.support.waiting import eventually


@contextlib.contextmanager
def own_database(prefix: str) -> Iterator[str]:
    """A new database named ``<prefix>_<random>``, its URL; dropped on the way out."""
    admin_url = os.environ["DATABASE_URL"]
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(admin_url)._replace(path=f"/{name}"))
    finally:
        asyncio.run(
            eventually(
                lambda: _dropped(admin_url, name),
                what=f"database {name} dropped",
                within=30,
                interval=0.2,
            )
        )


def _dropped(admin_url: str, name: str) -> bool:
    """Drop ``name``, ending our role's sessions on it. False while a session of another role
    holds it (an autovacuum worker, which only the superuser may end and which leaves by
    itself): DROP ... WITH (FORCE) then fails rather than wait."""
    with psycopg.connect(admin_url, autocommit=True) as connection:
        try:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ObjectInUse):
            return False
    return True
