"""Django's connections outside the request cycle heal: a session the server ended, or a
connection a statement broke, is closed before the next unit of work uses it."""

from __future__ import annotations

import select
import socket

import psycopg
import pytest
from django.db import connection

from conversations.store.health import django_connections_check, healthy, peer_closed
from conversations.store.pg.pools import conninfo

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_idle_socket_reads_as_open_until_its_peer_closes() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert not peer_closed(ours.fileno())
        theirs.close()
        assert peer_closed(ours.fileno())


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def _terminate(pid: int) -> None:
    with psycopg.connect(conninfo(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


def _until_readable() -> None:
    """Until the server's goodbye reached the idle connection's socket (or ten seconds)."""
    readable, _, _ = select.select([connection.connection.fileno()], [], [], 10)
    assert readable, "the server's goodbye never arrived"


def test_a_connection_whose_session_the_server_ended_is_replaced_before_use() -> None:
    pid = _backend_pid()
    _terminate(pid)
    _until_readable()

    # Run as a unit of work, the statement gets a new session instead of the ended one.
    assert healthy(_backend_pid)() != pid


def test_without_the_check_the_ended_session_fails_the_statement() -> None:
    """What the check saves a request from (and so what the test above proves)."""
    _terminate(_backend_pid())
    _until_readable()
    with pytest.raises(Exception, match=r"terminat|closed|lost"):
        _backend_pid()
    # The failed statement marked the connection; the next check closes it.
    django_connections_check()
    assert connection.connection is None
    assert _backend_pid() > 0


def test_a_healthy_connection_is_kept() -> None:
    pid = _backend_pid()
    django_connections_check()
    assert _backend_pid() == pid
