"""A turn's look-up (statement 1): everything its preparation needs to know of its thread.

One statement for the look-ups of one event loop that come while another is in flight
(``Grouped``): the thread, created on first use; its active runs; of its messages, only the ids
the request carries and two aggregates (never the whole thread); its latest state; its history
version.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, NamedTuple

from django import db as django_db

from conversations.models import SET_ASIDE_KINDS, RunStatus, ThreadStatus
from conversations.store.grouped import Grouped, PerLoop
from conversations.store.pg.params import json_rows
from conversations.store.pg.pools import POOLS
from conversations.store.pg.tables import AGENT_STATE, MESSAGE, RUN, THREAD


class LookUp(NamedTuple):
    """What one turn's look-up asks about its thread."""

    thread_id: str
    owner_id: int | None  # the caller: with ``thread_id``, the key of its thread (None: anonymous)
    agent_name: str
    ids: list[str]  # the message ids the request carries
    state_of: str | None  # the agent whose latest state is wanted, if any
    now: dt.datetime  # the thread's creation time, if it creates it


# x.e: a LookUp, [thread_id, owner_id, agent_name, ids, state_of, now]. Several turns' look-ups
# in one statement (grouped.py): each statement costs the runtime a send and PostgreSQL a
# round of its protocol, far more than a few more rows. The kinds and statuses are literals,
# so that a generic plan can use the partial indexes they match.
# The kinds a history may leave out (conversations.models), as an SQL list: the same list
# as the partial index message_set_aside's, so that the count below is read from it.
_SET_ASIDE = ", ".join(f"'{kind.value}'" for kind in SET_ASIDE_KINDS)

_LOOK_THREADS = f"""
WITH asked AS (
    SELECT x.n, x.e->>0 AS thread_id, (x.e->>1)::bigint AS owner_id, x.e->>2 AS agent_name,
        x.e->3 AS ids, x.e->>4 AS state_of, (x.e->>5)::timestamptz AS now
    FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS x(e, n)
), known AS (
    -- Each turn's thread: the caller's own of that id (ids are unique per owner, anonymous
    -- callers sharing one namespace: migration 0012), a probe of thread_unique_per_owner,
    -- which leads with the id (LIMIT 1: the planner does not flatten a subquery with a limit
    -- into a join over the whole table).
    SELECT a.*, th.id, th.owner_id AS stored_owner, th.title, th.history_version
    FROM asked a LEFT JOIN LATERAL (
        SELECT id, owner_id, title, history_version FROM {THREAD}
        WHERE thread_id = a.thread_id AND owner_id IS NOT DISTINCT FROM a.owner_id LIMIT 1
    ) th ON true
), created AS (
    -- Only threads not there yet: for an existing one, the insert's check of the unique
    -- index would wait for any write in flight on its row (a run's end, say).
    -- No conflict target: a thread conflicts on thread_unique_per_owner, or on
    -- thread_unique_anonymous for anonymous callers (NULLs are distinct in the first).
    INSERT INTO {THREAD} (thread_id, owner_id, agent_name, title, metadata, status,
                          created_at, updated_at)
    SELECT DISTINCT ON (thread_id, owner_id) thread_id, owner_id, agent_name, '', '{{}}',
        '{ThreadStatus.IDLE.value}', now, now
    FROM known WHERE id IS NULL ORDER BY thread_id, owner_id, n
    ON CONFLICT DO NOTHING
    RETURNING id, thread_id, owner_id, title, history_version
), t AS (
    -- A thread this statement created is not in its own snapshot of the table: from created.
    SELECT k.n, k.ids, k.state_of, coalesce(k.id, c.id) AS id,
        CASE WHEN k.id IS NULL THEN c.owner_id ELSE k.stored_owner END AS owner_id,
        coalesce(k.title, c.title) AS title,
        coalesce(k.history_version, c.history_version) AS history_version
    FROM known k LEFT JOIN created c ON k.id IS NULL AND c.thread_id = k.thread_id
        AND c.owner_id IS NOT DISTINCT FROM k.owner_id
)
SELECT t.n, t.id, t.owner_id, t.title,
    (SELECT json_agg(json_build_array(r.id, r.status)) FROM {RUN} r
      WHERE r.thread_id = t.id
        AND r.status IN ('{RunStatus.PENDING.value}', '{RunStatus.RUNNING.value}')),
    found.missing,
    json_build_array(found.current_sent, found.restore),
    -- The thread's messages set aside (superseded, agent states, reasoning), in their partial index
    -- message_set_aside: with the last position, a bound on its current messages that never
    -- reads them.
    (SELECT count(*) FROM {MESSAGE} m
      WHERE m.thread_id = t.id AND (m.superseded OR m.kind IN ({_SET_ASIDE}))),
    (SELECT max(m.position) FROM {MESSAGE} m WHERE m.thread_id = t.id),
    (SELECT s.state FROM {AGENT_STATE} s WHERE s.thread_id = t.id AND s.agent_name = t.state_of
      ORDER BY s.id DESC LIMIT 1),
    t.history_version
FROM t
"""


def _found(join: str, *, matched: str) -> str:
    """The carried ids against the thread's messages (``m``, joined by ``join``; ``matched``:
    not null where an id matched): the missing ones, the current ones' count, the superseded
    ones."""
    return f"""
CROSS JOIN LATERAL (
    SELECT json_agg(sent.message_id) FILTER (WHERE {matched} IS NULL) AS missing,
        count({matched}) FILTER (
            WHERE NOT m.superseded AND m.kind NOT IN ({_SET_ASIDE})
        ) AS current_sent,
        json_agg(sent.message_id) FILTER (WHERE m.superseded) AS restore
    FROM jsonb_array_elements_text(t.ids) AS sent(message_id)
    {join}
) found
"""


# Each id a look-up carries, probed in the thread's messages (message_unique_id: at most one
# row). A continued thread asks about its new messages alone (``history_ids.py``); joined
# with them instead, in the generic plan (which takes the ids for a hundred), PostgreSQL read every
# message of the thread to match one or two, a cost growing with the thread.
_FOUND_PROBED = _found(
    f"""LEFT JOIN LATERAL (
        SELECT true AS found, s.superseded, s.kind FROM {MESSAGE} s
        WHERE s.thread_id = t.id AND s.message_id = sent.message_id LIMIT 1
    ) m ON true""",
    matched="m.found",
)
# The ids matched with the thread's messages in one pass over each, for a look-up carrying
# many (a history read whole: a thread this process has not seen, a reload): probing each of
# a long history's ids costs more than that pass. (A semi join was once planned comparing
# every message with every id: quadratic in the thread's length.)
_FOUND_JOINED = _found(
    f"LEFT JOIN {MESSAGE} m ON m.thread_id = t.id AND m.message_id = sent.message_id",
    matched="m.id",
)
# Up to this many ids in each look-up of a statement, they are probed.
PROBED_IDS = 32
LOOK_PROBED = _LOOK_THREADS + _FOUND_PROBED + "WHERE t.id IS NOT NULL"
LOOK_JOINED = _LOOK_THREADS + _FOUND_JOINED + "WHERE t.id IS NOT NULL"


def look_ups_statement(look_ups: Sequence[LookUp]) -> tuple[str, list[str]]:
    """The one statement looking up ``look_ups``, and its parameters; a row per look-up whose
    thread is visible, its ordinal (from 1) first."""
    probed = all(len(look_up.ids) <= PROBED_IDS for look_up in look_ups)
    return (
        LOOK_PROBED if probed else LOOK_JOINED,
        [json_rows([list(look_up) for look_up in look_ups])],
    )


class _Asked:
    """A look-up in a group, and then its row (None: its thread was not visible)."""

    __slots__ = ("look_up", "row")

    def __init__(self, look_up: LookUp) -> None:
        self.look_up = look_up
        self.row: tuple[Any, ...] | None = None


async def look(look_up: LookUp) -> tuple[Any, ...]:
    """The look-up's row: the thread's pk, owner and title, its active runs, the carried ids
    it does not hold, (the current ones carried, the superseded ones carried), the count of
    messages set aside, the last position, the latest state and the history version."""
    # A thread created by a concurrent request that commits while the statement waits on its
    # row is invisible to the statement's snapshot (no row comes back): asked again, it is.
    for _ in range(3):
        asked = _Asked(look_up)
        await _look_ups.get().submit(asked)
        if asked.row is not None:
            return asked.row
    raise django_db.OperationalError("the thread could not be read back after its creation")


async def look_many(asked: Sequence[_Asked]) -> None:
    """A group's look-ups in one statement; each one's row on it."""
    pool = await POOLS.get()
    async with pool.connection() as conn:
        cur = await conn.execute(*look_ups_statement([one.look_up for one in asked]))
        rows = await cur.fetchall()
    for row in rows:
        asked[row[0] - 1].row = tuple(row[1:])


# The group is made on a loop's first look-up; it calls ``look_many`` as it is then.
_look_ups: PerLoop[Grouped[_Asked]] = PerLoop(lambda: Grouped(look_many, at_once=True))
