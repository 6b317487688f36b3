"""What runs write as they go, for any number of runs in one statement (PostgreSQL).

A run's progress (``Progress``: log entries, finished messages, agent states, the first token's
time, its end with its thread's status, its spans and cost) is rows in six tables. The writes
the runs of one event loop hand over at about the same moment (the runs' log writer,
``log_writer.py``) go to the database together: one statement, one round trip and one transaction
for all of them, where each run's end used to cost a statement of its own.

Every table's rows travel as one JSON parameter (``jsonb_array_elements``), each row naming its
run. A part is in the statement only when it has rows, always in the same order: the few
combinations that occur recur, and psycopg prepares each once per connection. The SQL writes
exactly what ``run_record_progress`` and ``spans_store`` write through the ORM
(tests/conversations/store/).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from conversations.models import RunStatus, ThreadStatus
from conversations.store.pg.params import json_rows
from conversations.store.pg.tables import (
    AGENT_STATE,
    MESSAGE,
    RUN,
    RUN_EVENT,
    SPAN,
    THREAD,
    TRACE_BLOB,
)
from conversations.store.spans import BLOB_TOUCH_EVERY, run_span_times, span_time
from conversations.store.types import Progress, RunProgress

# A row's thread: given, or its run's (a run relayed from another process, a bare trace).
_THREAD_OF = f"coalesce((e->>0)::bigint, (SELECT r.thread_id FROM {RUN} r WHERE r.id = e->>1))"

_EVENTS = (
    f"INSERT INTO {RUN_EVENT} (run_id, seq, type, payload, created_at)"
    " SELECT e->>0, (e->>1)::int, e->>2, e->3, %s FROM jsonb_array_elements(%s::jsonb) e"
)
# e: [thread, run, position or null, index in its run's batch, message_id, kind, role,
#     content, action_name, arguments, parent_message_id, action_execution_id, result, status,
#     status_reason, created_at]. A null position: after the thread's last message.
_MESSAGES = (
    f"INSERT INTO {MESSAGE} (thread_id, position, message_id, kind, role, content, action_name,"
    " arguments, parent_message_id, action_execution_id, result, image_format, image_bytes,"
    " status, status_reason, superseded, run_id, created_at)"
    " SELECT t.thread, coalesce((e->>2)::int, (SELECT coalesce(max(m.position), -1) + 1"
    f" FROM {MESSAGE} m WHERE m.thread_id = t.thread) + (e->>3)::int),"
    " e->>4, e->>5, e->>6, e->>7, e->>8, NULLIF(e->9, 'null'::jsonb), e->>10, e->>11, e->>12,"
    " '', '', e->>13, e->>14, false, e->>1, (e->>15)::timestamptz"
    f" FROM jsonb_array_elements(%s::jsonb) e CROSS JOIN LATERAL (SELECT {_THREAD_OF} AS thread) t"
    # Idempotent on the message id: a redelivered run stores nothing twice.
    " ON CONFLICT (thread_id, message_id) DO NOTHING"
)
# e: [thread, run, agent_name, state, node_name, the state's run_id, active, running]
_STATES = (
    f"INSERT INTO {AGENT_STATE} (thread_id, agent_name, state, config, node_name, run_id,"
    f" active, running, created_at) SELECT {_THREAD_OF}, e->>2, e->3, '{{}}'::jsonb, e->>4,"
    " e->>5, (e->>6)::boolean, (e->>7)::boolean, %s FROM jsonb_array_elements(%s::jsonb) e"
)
# e: [run, status (null: not its end), error_code, error_details, input_tokens, output_tokens,
#     cached_input_tokens, reasoning_tokens, limit_trips, model, cost, first_token_at,
#     its thread's status, its start's time and model (null and "": none; see RunStart),
#     its run span's start and end (null: none; then the run's own times stand)].
#     Named: the threads' part reads what it returns.
# Whether the row gains its start: given, and not recorded yet (by the heartbeat, say).
_STARTS = "(r.started_at IS NULL AND e->>13 IS NOT NULL)"
_RUNS = (
    f"ran AS (UPDATE {RUN} r SET status = coalesce(e->>1,"
    f" CASE WHEN {_STARTS} AND r.status = 'pending' THEN 'running' ELSE r.status END),"
    # The run span's times, when the trace comes: a run's duration and its span's agree.
    " started_at = coalesce((e->>15)::timestamptz,"
    f" CASE WHEN {_STARTS} THEN (e->>13)::timestamptz ELSE r.started_at END),"
    f" heartbeat_at = CASE WHEN {_STARTS} THEN (e->>13)::timestamptz ELSE r.heartbeat_at END,"
    f" attempts = r.attempts + CASE WHEN {_STARTS} THEN 1 ELSE 0 END,"
    " error_code = CASE WHEN e->>1 IS NULL THEN r.error_code ELSE e->>2 END,"
    " error_details = CASE WHEN e->>1 IS NULL THEN r.error_details"
    " ELSE NULLIF(e->3, 'null'::jsonb) END,"
    " finished_at = coalesce((e->>16)::timestamptz,"
    " CASE WHEN e->>1 IS NULL THEN r.finished_at ELSE %s END),"
    " input_tokens = r.input_tokens + (e->>4)::bigint,"
    " output_tokens = r.output_tokens + (e->>5)::bigint,"
    " cached_input_tokens = r.cached_input_tokens + (e->>6)::bigint,"
    " reasoning_tokens = r.reasoning_tokens + (e->>7)::bigint,"
    " limit_trips = coalesce(NULLIF(e->8, 'null'::jsonb), r.limit_trips),"
    f" model = CASE WHEN e->>9 <> '' THEN e->>9 WHEN {_STARTS} AND e->>14 <> '' THEN e->>14"
    " ELSE r.model END,"
    " cost = coalesce((e->>10)::numeric, r.cost),"
    " first_token_at = coalesce((e->>11)::timestamptz, r.first_token_at)"
    " FROM jsonb_array_elements(%s::jsonb) e WHERE r.id = e->>0"
    # The same ids as an array: the planner then finds the rows through the primary key. It
    # takes a JSON array for a hundred rows, and joined the whole table (a scan growing with
    # it) to a batch of a dozen. Made in SQL: psycopg's adaptation of a Python list cost more
    # than the statement saved.
    " AND r.id = ANY(ARRAY(SELECT x->>0 FROM jsonb_array_elements(%s::jsonb) x))"
    " RETURNING r.thread_id, e->>12 AS thread_status)"
)
# Runs whose row gains only its first token's time (a batch while the model streams): a
# statement about half as costly as through ``_RUNS``, and it lies on a relayed run's way to
# its followers. v: (run, first_token_at).
_FIRST_TOKENS = (
    f"UPDATE {RUN} r SET first_token_at = (e->>1)::timestamptz"
    " FROM jsonb_array_elements(%s::jsonb) e WHERE r.id = e->>0"
    " AND r.id = ANY(ARRAY(SELECT x->>0 FROM jsonb_array_elements(%s::jsonb) x))"
)
_THREADS = (
    f"UPDATE {THREAD} t SET status = ran.thread_status, updated_at = %s FROM ran"
    " WHERE t.id = ran.thread_id AND ran.thread_status IS NOT NULL"
)
# e: [trace_id, run, span_id, parent_span_id, kind, name, input, output, attributes, is_error,
#     is_complete, started_at, ended_at]
_SPANS = (
    f"INSERT INTO {SPAN} (trace_id, run_id, span_id, parent_span_id, kind, name, input, output,"
    " attributes, is_error, is_complete, started_at, ended_at)"
    " SELECT e->>0, e->>1, e->>2, e->>3, e->>4, e->>5, NULLIF(e->6, 'null'::jsonb),"
    " NULLIF(e->7, 'null'::jsonb), e->8, (e->>9)::boolean, (e->>10)::boolean,"
    " (e->>11)::timestamptz, (e->>12)::timestamptz FROM jsonb_array_elements(%s::jsonb) e"
)

# e: [sha256, content]. A blob already stored has its last use moved forward at most hourly
# (retention reads it), so a hot system prompt's row is not rewritten by every run.
_BLOBS = (
    f"INSERT INTO {TRACE_BLOB} AS b (sha256, content, last_used_at)"
    " SELECT e->>0, e->1, %s FROM jsonb_array_elements(%s::jsonb) e"
    " ON CONFLICT (sha256) DO UPDATE SET last_used_at = EXCLUDED.last_used_at"
    " WHERE b.last_used_at < EXCLUDED.last_used_at - %s"
)


def progress_statement(
    entries: Sequence[RunProgress], *, now: dt.datetime
) -> tuple[str, list[Any]] | None:
    """The statement writing ``entries`` (at most one per run) and its parameters; None when
    there is nothing to write."""
    runs = [entry.run_id for entry in entries]
    if len(set(runs)) != len(runs):
        # One statement cannot update a row twice: a run's batches go one after the other.
        raise ValueError("at most one progress per run in one statement")
    events: list[Any] = []
    messages: list[Any] = []
    states: list[Any] = []
    updates: list[Any] = []
    first_tokens: list[tuple[str, Any]] = []
    spans: list[Any] = []
    # By hash, across the entries: one statement may not upsert a row twice.
    blobs: dict[str, Any] = {}
    for run_id, thread_pk, progress in entries:
        events.extend([run_id, e.seq, e.type, e.payload] for e in progress.events)
        first = progress.first_position
        messages.extend(
            [
                thread_pk,
                run_id,
                None if first is None else first + index,
                index,
                m.message_id,
                m.kind,
                m.role,
                m.content,
                m.action_name,
                m.arguments,
                m.parent_message_id,
                m.action_execution_id,
                m.result,
                m.status,
                m.status_reason,
                m.created_at,
            ]
            for index, m in enumerate(progress.messages)
        )
        states.extend(
            [
                thread_pk,
                run_id,
                s["agent_name"],
                s["state"],
                s["node_name"],
                s["run_id"],
                s["active"],
                s["running"],
            ]
            for s in progress.agent_states
        )
        update = _run_update(run_id, progress)
        if update is not None:
            if update[1] is None and update[10] is None and update[13] is None and not update[16]:
                # not its end, no cost, not its start: its first token's time alone
                first_tokens.append((run_id, update[11]))
            else:
                updates.append(update)
        trace = progress.trace
        if trace is not None and trace.persist_spans and trace.records:
            spans.extend(
                [
                    trace.trace_id,
                    run_id,
                    r.span_id,
                    r.parent_span_id,
                    r.kind,
                    r.name[:255],
                    r.input,
                    r.output,
                    r.attributes,
                    r.is_error,
                    r.is_complete,
                    span_time(r.started_at),
                    span_time(r.ended_at),
                ]
                for r in trace.records
            )
            blobs.update(trace.blobs)
    parts: list[str] = []
    params: list[Any] = []
    if events:
        parts.append(f"events AS ({_EVENTS})")
        params += [now, json_rows(events)]
    if messages:
        parts.append(f"messages AS ({_MESSAGES})")
        params += [json_rows(messages)]
    if states:
        parts.append(f"states AS ({_STATES})")
        params += [now, json_rows(states)]
    if spans:
        parts.append(f"spans AS ({_SPANS})")
        params += [json_rows(spans)]
    if blobs:
        parts.append(f"blobs AS ({_BLOBS})")
        params += [now, json_rows([[k, v] for k, v in blobs.items()]), BLOB_TOUCH_EVERY]
    if first_tokens:
        parts.append(f"first_tokens AS ({_FIRST_TOKENS})")
        first_token_rows = json_rows(first_tokens)
        params += [first_token_rows, first_token_rows]
    if updates:
        parts.append(_RUNS)
        update_rows = json_rows(updates)
        params += [now, update_rows, update_rows]
        if any(update[12] is not None for update in updates):
            parts.append(f"threads AS ({_THREADS})")
            params += [now]
    if not parts:
        return None
    return f"WITH {', '.join(parts)} SELECT 1", params


def _run_update(run_id: str, progress: Progress) -> list[Any] | None:
    """The run row's changes in ``progress`` (its end, its first token's time, its cost), as
    the runs' part reads them; None: the row does not change."""
    outcome = progress.outcome
    trace = progress.trace
    cost = str(trace.cost) if trace is not None and trace.cost is not None else None
    first_token_at = progress.first_token_at
    start = progress.start
    started_at, start_model = (None, "") if start is None else start
    span_start, span_end = (None, None) if trace is None else run_span_times(trace)
    if outcome is None:
        if first_token_at is None and cost is None and start is None and span_end is None:
            return None
        return [
            run_id, None, "", None, 0, 0, 0, 0, None, "", cost, first_token_at, None,
            started_at, start_model, span_start, span_end,
        ]  # fmt: skip
    status = str(outcome.status)
    if status == RunStatus.INTERRUPTED or (progress.interrupted and status == RunStatus.SUCCEEDED):
        status, thread_status = str(RunStatus.INTERRUPTED), str(ThreadStatus.INTERRUPTED)
    else:
        thread_status = str(ThreadStatus.IDLE)
    usage = outcome.usage
    return [
        run_id,
        status,
        outcome.error_code,
        outcome.error_details,
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_input_tokens,
        usage.reasoning_tokens,
        outcome.limit_trips or None,
        outcome.model,
        cost,
        first_token_at,
        thread_status,
        started_at,
        start_model,
        span_start,
        span_end,
    ]
