"""psycopg's errors as Django's, and what a turn racing another on its thread meets."""

from __future__ import annotations

import psycopg
from django import db as django_db

# The constraints a turn's write breaks when another request on its thread wrote first (its
# run, or the same new messages): the turn is then refused as the thread's being busy. A
# reused run id breaks none of them: that is the caller's own conflict.
RACED = frozenset({"run_one_active_per_thread", "message_unique_id", "message_unique_position"})


def translate(exc: psycopg.Error) -> Exception:
    """psycopg's errors as Django's, so callers handle both stores alike."""
    for psycopg_class, django_class in (
        (psycopg.errors.IntegrityError, django_db.IntegrityError),
        (psycopg.errors.DataError, django_db.DataError),
        (psycopg.errors.OperationalError, django_db.OperationalError),
    ):
        if isinstance(exc, psycopg_class):
            return django_class(str(exc))
    return django_db.DatabaseError(str(exc))


class Busy(Exception):
    """The look-up found active runs on the turn's thread (their ids: ``running``): reaped
    when their executors died, else the turn is refused."""

    def __init__(self, running: list[str]) -> None:
        super().__init__("thread busy")
        self.running = running
