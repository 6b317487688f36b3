"""A turn's write (statement 2): its run, its new messages and its thread's status, atomically.

One statement for the turns of one event loop whose look-ups end while another write is in
flight (``Grouped``). Before it, and only when the client no longer sends some stored messages
or sends superseded ones again, the thread's messages are set aside or restored
(``supersede_messages``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, NamedTuple

from conversations.models import SET_ASIDE_KINDS, MessageKind
from conversations.store.grouped import Grouped, PerLoop
from conversations.store.pg.params import json_rows
from conversations.store.pg.pools import POOLS
from conversations.store.pg.tables import MESSAGE, RUN, THREAD


class TurnWrite(NamedTuple):
    """One turn's rows: its run (see ``_INSERT_RUNS``), its new messages (``_INSERT_MESSAGES``)
    and its thread's (``_UPDATE_THREADS``)."""

    run: list[Any]
    messages: list[tuple[Any, ...]]
    thread: list[Any]


# e: [id, thread, agent_name, protocol, request_type, previous_run_id, status, created_at,
#     started_at, heartbeat_at, request_payload, attempts, executor]
_INSERT_RUNS = (
    f"INSERT INTO {RUN} (id, thread_id, agent_name, protocol, request_type, previous_run_id,"
    " status, error_code, error_details, limit_trips, model, input_tokens, output_tokens,"
    " cached_input_tokens, reasoning_tokens, cost, created_at, started_at, heartbeat_at,"
    " request_payload, cancel_requested, attempts, executor)"
    " SELECT e->>0, (e->>1)::bigint, e->>2, e->>3, e->>4, e->>5, e->>6, '', NULL, '[]', '', 0,"
    " 0, 0, 0, NULL, (e->>7)::timestamptz, (e->>8)::timestamptz, (e->>9)::timestamptz,"
    " NULLIF(e->10, 'null'::jsonb), false, (e->>11)::int,"
    " coalesce(e->>12, '')"
    " FROM jsonb_array_elements(%s::jsonb) e"
)
# e: [position, message_id, kind, role, content, action_name, arguments, parent_message_id,
#     action_execution_id, result, image_format, image_bytes, status, status_reason, created_at,
#     thread, run]
_INSERT_MESSAGES = (
    f"INSERT INTO {MESSAGE} (thread_id, position, message_id, kind, role, content, action_name,"
    " arguments, parent_message_id, action_execution_id, result, image_format, image_bytes,"
    " status, status_reason, superseded, run_id, created_at)"
    " SELECT (e->>15)::bigint, (e->>0)::int, e->>1, e->>2, e->>3, e->>4, e->>5,"
    " NULLIF(e->6, 'null'::jsonb), e->>7, e->>8, e->>9, e->>10, e->>11, e->>12, e->>13, false,"
    " e->>16, (e->>14)::timestamptz FROM jsonb_array_elements(%s::jsonb) e"
)
# e: [thread, status, updated_at, title (empty: unchanged)]. The ids again as an array: the
# planner then finds the rows by key (see progress.py).
_UPDATE_THREADS = (
    f"UPDATE {THREAD} t SET status = e->>1, updated_at = (e->>2)::timestamptz,"
    " title = CASE WHEN e->>3 <> '' THEN e->>3 ELSE t.title END"
    " FROM jsonb_array_elements(%s::jsonb) e"
    " WHERE t.id = (e->>0)::bigint"
    " AND t.id = ANY(ARRAY(SELECT (x->>0)::bigint FROM jsonb_array_elements(%s::jsonb) x))"
)
_WRITE_TURNS = f"WITH runs AS ({_INSERT_RUNS}), messages AS ({_INSERT_MESSAGES}) {_UPDATE_THREADS}"


def turn_writes_statement(writes: Sequence[TurnWrite]) -> tuple[str, list[str]]:
    """The one statement writing ``writes``, and its parameters."""
    threads = json_rows([write.thread for write in writes])
    return _WRITE_TURNS, [
        json_rows([write.run for write in writes]),
        json_rows([row for write in writes for row in write.messages]),
        threads,
        threads,
    ]


async def write_turns(writes: Sequence[TurnWrite]) -> None:
    """The turns' writes in ONE statement, atomic as a whole. psycopg's errors are left as
    they are: the caller tells a raced write by its constraint."""
    pool = await POOLS.get()
    async with pool.connection() as conn:
        await conn.execute(*turn_writes_statement(writes))


# The group is made on a loop's first write; it calls ``write_turns`` as it is then.
_turn_writes: PerLoop[Grouped[TurnWrite]] = PerLoop(lambda: Grouped(write_turns, at_once=True))


async def write_turn(write: TurnWrite) -> None:
    """One turn's write, in the statement of the loop's next group."""
    await _turn_writes.get().submit(write)


def new_message_rows(
    first_of: dict[str, Any], missing: Sequence[str], last_position: int, now: dt.datetime
) -> list[tuple[Any, ...]]:
    """Rows for the messages the thread does not hold yet (``missing``, ids of ``first_of``'s
    messages, which are in the history's order), after ``last_position``; a ``TurnWrite``'s
    messages once their thread and run are added. Only the missing ones are looked at: a
    continued thread's history is mostly stored already."""
    wanted = set(missing)
    found: list[Any] = []
    if wanted:
        # From the end, where a continued thread's new messages are, to the earliest missing.
        for message_id in reversed(first_of):
            if message_id in wanted:
                found.append(first_of[message_id])
                if len(found) == len(wanted):
                    break
        found.reverse()
    rows = []
    position = last_position
    for m in found:
        position += 1
        arguments = m.agent_state if m.kind == MessageKind.AGENT_STATE else m.arguments
        rows.append(
            (
                position,
                m.id,
                m.kind,
                m.role,
                m.content,
                m.action_name,
                arguments,
                m.parent_message_id,
                m.action_execution_id,
                m.result,
                m.image_format,
                m.image_bytes,
                "success",
                "",
                m.created_at or now,
            )
        )
    return rows


async def supersede_messages(
    cur: Any, thread_pk: int, incoming: list[str], *, supersede: bool, restore: Sequence[str]
) -> None:
    """The client no longer sends some stored messages (a regenerate, an edit, a deletion):
    they are superseded, kept for the record; ones it sends again (``restore``) are current
    again. Rare: a history that extends what is stored touches nothing here."""
    if supersede:
        # The reasoning of a run whose messages are superseded goes with them.
        await cur.execute(
            f"WITH gone AS (UPDATE {MESSAGE} SET superseded = true"
            " WHERE thread_id = %s AND NOT superseded"
            " AND NOT (kind = ANY(%s)) AND NOT (message_id = ANY(%s)) RETURNING run_id)"
            f" UPDATE {MESSAGE} SET superseded = true WHERE thread_id = %s AND NOT superseded"
            " AND kind = %s AND run_id IN (SELECT run_id FROM gone)",
            (
                thread_pk,
                [str(kind) for kind in SET_ASIDE_KINDS],
                incoming,
                thread_pk,
                str(MessageKind.REASONING),
            ),
        )
    if restore:
        await cur.execute(
            f"UPDATE {MESSAGE} SET superseded = false WHERE thread_id = %s"
            " AND message_id = ANY(%s)",
            (thread_pk, list(restore)),
        )
