"""Claiming queued runs, many in one statement (PostgreSQL).

A worker claims each run it is handed (pending -> running) before it writes or acts for it, so
that a task delivered twice executes once. Claimed one statement each, fifty conversations on a
worker's loop made a claim as many statements as turns, each its own round trip and backend
work (pg_stat_statements, celery shape: a statement per turn, the most frequent of the worker's).
The claims of one loop now go together (``Grouped``, conversations/store/pg.py): the statement
sets what ``run_mark_running`` sets through the ORM, for the runs still pending.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import orjson

from conversations.models import RunStatus
from conversations.store.pg_progress import RUN


class Claim:
    """One run to claim, then whether this claim took it."""

    __slots__ = ("claimed", "model", "run_id")

    def __init__(self, run_id: str, model: str) -> None:
        self.run_id = run_id
        self.model = model
        self.claimed = False


_CLAIM_MANY = (
    f"UPDATE {RUN} AS r SET status = %(running)s, started_at = %(now)s,"
    " heartbeat_at = %(now)s, model = c.model, attempts = r.attempts + 1"
    " FROM (SELECT DISTINCT ON (e->>0) e->>0 AS id, e->>1 AS model"
    " FROM jsonb_array_elements(%(claims)s::jsonb) AS e) AS c"
    " WHERE r.id = c.id AND r.status = %(pending)s RETURNING r.id"
)


def claims_statement(claims: Sequence[Claim], *, now: dt.datetime) -> tuple[str, dict[str, Any]]:
    """The statement claiming ``claims``'s runs that are pending; it returns their ids."""
    rows = [[claim.run_id, claim.model] for claim in claims]
    return _CLAIM_MANY, {
        "running": str(RunStatus.RUNNING),
        "pending": str(RunStatus.PENDING),
        "now": now,
        "claims": orjson.dumps(rows).decode(),
    }


def settle_claims(claims: Sequence[Claim], claimed_ids: set[str]) -> None:
    """Each claimed run to the first of its claims: a run handed twice to one loop (a task
    delivered again while the first delivery's claim is in flight) is taken once."""
    for claim in claims:
        if claim.run_id in claimed_ids:
            claim.claimed = True
            claimed_ids.discard(claim.run_id)
