"""Database connections that heal: a broken one is dropped before it is used again.

A connection can die while it sits idle: PostgreSQL restarted, a failover, a PgBouncer
restart, ``pg_terminate_backend`` from an idle-connection reaper. Django's request cycle copes
with that for the requests it serves (``close_old_connections`` on ``request_started`` and
``request_finished``, ``CONN_HEALTH_CHECKS``), but the runtime also uses the database from
threads no request cycle visits: the thread that ``sync_to_async`` runs the hot endpoints' and
the worker's ORM calls on, and the turn store's own pool (``pool.py``). There a dead connection
stayed in place, and every later request failed on it for as long as the process lived.

So each unit of database work on those threads first looks at the connections it is about to
use (``db_sync_to_async``): a server that ended a session has closed its socket, which a
zero-timeout ``poll`` sees without a round trip, and a connection an earlier statement broke
carries Django's ``errors_occurred``. Either is closed, and the unit connects anew. A database
still down then fails the unit at once with the driver's error, which the protocol surfaces
answer in their own shape; nothing waits for the outage to end.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import select
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import SyncToAsync, sync_to_async
from django.db import connections

logger = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


def peer_closed(fd: int) -> bool:
    """Whether an idle connection's socket has something to read: for a database session
    nobody is waiting on, that is the server's goodbye (its error message, then the end of
    the stream). A stray notice would read the same; such a connection is only replaced."""
    if fd < 0:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        # POLLHUP and POLLERR are reported whatever is asked for.
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - no poll() (Windows)
    return bool(readable)


def _raw_connection_closed(raw: Any) -> bool:
    """A DB-API connection (psycopg 3 or 2) whose session has ended. Drivers without a socket
    (SQLite) never are."""
    if getattr(raw, "closed", False):
        return True
    fileno = getattr(raw, "fileno", None)
    if fileno is None:
        return False
    try:
        return peer_closed(fileno())
    except Exception:  # the driver knows the connection is gone
        return True


def _discard(alias: str, wrapper: Any) -> None:
    raw = wrapper.connection
    logger.warning("database connection %r was lost; reconnecting", alias)
    # Close the driver's connection first: handed back to a pool still open, it would be kept
    # as healthy and given out again.
    with contextlib.suppress(Exception):
        raw.close()
    with contextlib.suppress(Exception):
        wrapper.close()
    pool = getattr(wrapper, "pool", None)
    if pool is not None:
        # The server that dropped this session dropped the pool's idle ones too: check them
        # now (a failed check costs nothing; a live one a round trip) rather than hand each
        # one out to fail a request of its own.
        with contextlib.suppress(Exception):
            pool.check()


def django_connections_check() -> None:
    """Close this thread's Django connections that are broken, so that the next statement
    connects anew. Never inside a transaction: its owner decides (Django's ``atomic`` closes
    a connection whose rollback fails)."""
    for wrapper in connections.all(initialized_only=True):
        if wrapper.connection is None or wrapper.in_atomic_block:
            continue
        if wrapper.errors_occurred:
            # A statement failed since the last check: a round trip tells a broken connection
            # from a refused statement (as Django's own close_if_unusable_or_obsolete does).
            if wrapper.is_usable():
                wrapper.errors_occurred = False
                continue
        elif not _raw_connection_closed(wrapper.connection):
            continue
        _discard(wrapper.alias, wrapper)


def healthy(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` (a unit of ORM work) run after ``django_connections_check``."""

    @functools.wraps(function)
    def unit(*args: P.args, **kwargs: P.kwargs) -> R:
        django_connections_check()
        return function(*args, **kwargs)

    return unit


def db_sync_to_async(function: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """``sync_to_async`` (thread-sensitive) for a unit of ORM work, on connections checked
    first. Use it for every database call made outside Django's request cycle."""
    return sync_to_async(healthy(function))


async def on_shared_thread(function: Callable[..., R], /, **kwargs: Any) -> R:
    """``function(**kwargs)`` on asgiref's one shared thread for thread-sensitive code, the
    thread ``sync_to_async`` uses outside Django's request cycle (the hot endpoints, runs,
    the SQLite store), even when called from inside a request: that thread's connection is
    the one to check or to use, on connections checked first."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    call = functools.partial(context.run, functools.partial(healthy(function), **kwargs))
    return await loop.run_in_executor(SyncToAsync.single_thread_executor, call)
