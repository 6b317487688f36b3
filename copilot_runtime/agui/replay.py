"""``connect``: a thread's stored runs replayed from the durable log, then its running run live.

Every run of the thread (whatever protocol started it) becomes ``RUN_STARTED`` (its own run id,
its input messages: the rows the run stored that it did not produce), its logged events, and
``RUN_FINISHED`` or ``RUN_ERROR``; the finished runs are compacted together as the TypeScript
runtime does (one content event per message). A run still in progress is then followed through
``follow_run``: its events from its start (or from the client's ``lastSeenEventId``), then live,
from any process, so it works with the inline executor and with Celery workers alike.

``lastSeenEventId`` is ``<runId>`` (that run and everything before it were seen) or
``<runId>:<seq>`` (the run's logged events up to ``seq`` were seen). An id naming no run of the
thread replays everything, like a client that has seen nothing.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from conversations.models import Message, Run, RunEvent, Thread
from conversations.selectors import run_ended_unlogged
from conversations.store.health import db_sync_to_async
from copilot_runtime.agui.encoder import SseEncoder, sse_frames
from copilot_runtime.agui.generation import (
    finished_1_0,
    last_run_outcome,
    run_started_1_0,
    snapshot_messages,
)
from copilot_runtime.agui.messages import agui_messages
from copilot_runtime.agui.translate import (
    MESSAGES_SNAPSHOT,
    STATE_SNAPSHOT,
    Translator,
    compact_events,
    run_started,
)
from copilot_runtime.client_numbers import ClientNumberError, parse_client_int
from copilot_runtime.events import (
    ActionResult,
    ActionStart,
    Event,
    ReasoningStart,
    RunError,
    TextStart,
    event_from_payload,
    result_message_id,
)
from copilot_runtime.runs.executor import reap_if_stale_check
from copilot_runtime.runs.relay import follow_run, log_read

logger = logging.getLogger(__name__)

_ACTIVE = ("pending", "running")
# RunEvent.seq is a PositiveIntegerField: no logged event has a larger seq.
_SEQ_MAX = 2**31 - 1


@dataclass(frozen=True)
class Cursor:
    run_id: str
    seq: int | None = None


def cursor_parse(raw: Any) -> Cursor | None:
    if not isinstance(raw, str) or not raw.strip():
        return None
    run_id, _, seq = raw.strip().rpartition(":")
    if run_id:
        try:
            return Cursor(run_id=run_id, seq=parse_client_int(seq, minimum=0, maximum=_SEQ_MAX))
        except ClientNumberError:
            pass  # no seq this server wrote: the whole id is a run id, as any other text is
    return Cursor(run_id=raw.strip())


@dataclass
class ActiveRun:
    run_id: str
    started: dict[str, Any]
    seen: list[Event] = field(default_factory=list)  # logged events the client already has
    after_seq: int = 0


@dataclass
class ThreadHistory:
    thread_id: str
    events: list[dict[str, Any]] = field(default_factory=list)  # finished runs, uncompacted
    active: ActiveRun | None = None
    # The last finished run's id and logged events: a 1.0 client's snapshot run and outcome.
    last_run_id: str = ""
    last_run_events: list[Event] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not self.events and self.active is None


def _output_ids(events: list[Event]) -> set[str]:
    ids: set[str] = set()
    for event in events:
        if isinstance(event, TextStart | ReasoningStart):
            ids.add(event.message_id)
        elif isinstance(event, ActionStart):
            ids.add(event.action_execution_id)
        elif isinstance(event, ActionResult):
            ids.add(result_message_id(event.action_execution_id))
    return ids


def _run_input(run: Run, thread_id: str, inputs: list[Message]) -> dict[str, Any]:
    run_input: dict[str, Any] = {
        "threadId": thread_id,
        "runId": run.id,
        "state": {},
        "messages": agui_messages(inputs),
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    if run.previous_run_id:
        run_input["parentRunId"] = run.previous_run_id
    return run_input


def _terminal_for_unlogged_end(run: Run, translator: Translator) -> list[dict[str, Any]]:
    """A finished run whose log has no terminal event (refused before it executed, or lost)."""
    if run.status == "failed":
        details = run.error_details or {}
        message = str(details.get("message") or "The run failed.")
        return translator.error(message=message, code=run.error_code or "RUN_FAILED")
    if run.is_finished:
        return translator.finish()
    return translator.incomplete()


def thread_history(*, thread: Thread, cursor: Cursor | None = None) -> ThreadHistory:
    """What ``connect`` replays for ``thread`` (reads the database; call it off the loop)."""
    runs = list(Run.objects.filter(thread=thread).order_by("created_at", "id"))
    if cursor is not None:
        position = next((i for i, run in enumerate(runs) if run.id == cursor.run_id), None)
        if position is not None:
            seen_run = runs[position]
            keep_seen = seen_run.status in _ACTIVE
            runs = runs[position if keep_seen else position + 1 :]
        else:
            cursor = None
    active_run = runs[-1] if runs and runs[-1].status in _ACTIVE else None
    finished = runs[:-1] if active_run is not None else runs
    logs: dict[str, list[Event]] = {run.id: [] for run in runs}
    finished_ids = [run.id for run in finished]
    if finished_ids:
        for row in RunEvent.objects.filter(run_id__in=finished_ids).order_by("run_id", "seq"):
            logs[row.run_id].append(event_from_payload(row.type, row.payload))
    rows_by_run: dict[str, list[Message]] = {}
    for row in Message.objects.filter(thread=thread).order_by("position"):
        if row.run_id is not None:
            rows_by_run.setdefault(row.run_id, []).append(row)

    history = ThreadHistory(thread_id=thread.thread_id)
    for run in finished:
        events = logs[run.id]
        produced = _output_ids(events)
        inputs = [row for row in rows_by_run.get(run.id, []) if row.message_id not in produced]
        translator = Translator(thread_id=thread.thread_id, run_id=run.id)
        history.events.append(
            run_started(
                thread_id=thread.thread_id,
                run_id=run.id,
                run_input=_run_input(run, thread.thread_id, inputs),
            )
        )
        history.events.extend(translator.translate_all(events))
        if not translator.ended:
            history.events.extend(_terminal_for_unlogged_end(run, translator))
        history.last_run_id = run.id
        history.last_run_events = events

    if active_run is not None:
        after_seq = cursor.seq if cursor is not None and cursor.run_id == active_run.id else None
        seen = (
            [
                event_from_payload(logged.type, logged.payload)
                for logged in log_read(
                    run_id=active_run.id, after_seq=0, before_seq=after_seq + 1, limit=100_000
                )
            ]
            if after_seq
            else []
        )
        # Input rows of a running run: everything it stored except what it produced so far.
        produced = _output_ids(
            [
                event_from_payload(logged.type, logged.payload)
                for logged in log_read(run_id=active_run.id, after_seq=0, limit=100_000)
            ]
        )
        inputs = [
            row for row in rows_by_run.get(active_run.id, []) if row.message_id not in produced
        ]
        history.active = ActiveRun(
            run_id=active_run.id,
            started=run_started(
                thread_id=thread.thread_id,
                run_id=active_run.id,
                run_input=_run_input(active_run, thread.thread_id, inputs),
            ),
            seen=seen,
            after_seq=after_seq or 0,
        )
    return history


class _RunEndedUnlogged(Exception):
    """The followed run ended without a terminal event in its log."""


async def _follow_active(
    thread_id: str, active: ActiveRun, *, protocol_1_0: bool
) -> AsyncIterator[bytes]:
    encoder = SseEncoder(thread_id=thread_id, run_id=active.run_id, protocol_1_0=protocol_1_0)
    opening = encoder.start(active.started["input"])
    if active.seen:
        opening += encoder.resume(active.seen)
    yield opening
    reap_if_stale = reap_if_stale_check(active.run_id)

    async def check_alive() -> None:
        await reap_if_stale()
        if await db_sync_to_async(run_ended_unlogged)(run_id=active.run_id):
            raise _RunEndedUnlogged

    try:
        async for logged in follow_run(
            active.run_id, after_seq=active.after_seq, check_alive=check_alive
        ):
            chunk = encoder.encode([event_from_payload(logged.type, logged.payload)])
            if chunk:
                yield chunk
            if encoder.finished:
                return
    except _RunEndedUnlogged:
        logger.info(
            "run %s ended without a terminal event; ending its connect stream", active.run_id
        )
    if not encoder.finished:
        yield encoder.encode([RunError(message="The run ended unexpectedly.", code="RUN_LOST")])


async def replay_stream(
    history: ThreadHistory, *, protocol_1_0: bool = False
) -> AsyncIterator[bytes]:
    """The connect stream: the compacted finished runs (for a 1.0 client, restated as one run
    holding their snapshots), then the running run live."""
    if history.events:
        compacted = compact_events(history.events)
        yield sse_frames(_as_snapshots(history, compacted) if protocol_1_0 else compacted)
    if history.active is not None:
        async for chunk in _follow_active(
            history.thread_id, history.active, protocol_1_0=protocol_1_0
        ):
            yield chunk


def _as_snapshots(history: ThreadHistory, compacted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The finished runs as the 1.0 transport specification replays a thread: one run whose
    ``MESSAGES_SNAPSHOT`` holds the conversation and ``STATE_SNAPSHOT`` the latest state."""
    thread_id, run_id = history.thread_id, history.last_run_id
    started = run_started_1_0(
        run_started(
            thread_id=thread_id,
            run_id=run_id,
            run_input={"threadId": thread_id, "runId": run_id, "messages": []},
        )
    )
    messages = snapshot_messages(history.events)
    out = [started, {"type": MESSAGES_SNAPSHOT, "messages": messages}]
    state = next((e for e in reversed(compacted) if e["type"] == STATE_SNAPSHOT), None)
    if state is not None:
        out.append({"type": STATE_SNAPSHOT, "snapshot": state["snapshot"]})
    outcome = last_run_outcome(thread_id=thread_id, run_id=run_id, events=history.last_run_events)
    out.append(finished_1_0(thread_id=thread_id, run_id=run_id, outcome=outcome))
    return out
