"""The turn's storage path through the ORM services, for databases other than PostgreSQL.

Every call runs on ONE thread, asgiref's shared thread for thread-sensitive code (the one
``sync_to_async`` uses outside a request): SQLite has a single writer, and writes queued on one
thread never wait on the file lock for each other (``database is locked`` under concurrent
users came from many request threads writing at once). On that thread Django keeps its
connection open for the life of the process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db import connection, transaction

from conversations.models import Run
from conversations.selectors import agent_state_latest, run_log_read
from conversations.services.messages import messages_sync_input
from conversations.services.runs import (
    ACTIVE_STATUSES,
    LoggedEvent,
    ThreadBusy,
    run_create,
    run_heartbeats,
    run_mark_running,
    run_record_progress,
    run_record_start,
    runs_log_batches,
)
from conversations.services.threads import thread_get_or_create_for_turn
from conversations.store import spans
from conversations.store.health import on_shared_thread
from conversations.store.types import (
    PreparedTurn,
    Progress,
    Reap,
    RunProgress,
    SpanWrite,
    TurnRecord,
)

T = TypeVar("T")


async def on_store_thread(function: Callable[..., T], /, **kwargs: Any) -> T:
    """Run ``function(**kwargs)`` on the store's single thread."""
    return await on_shared_thread(function, **kwargs)


def _select_one() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _active_runs(thread_pk: int) -> list[str]:
    return list(
        Run.objects.filter(thread_id=thread_pk, status__in=ACTIVE_STATUSES).values_list(
            "pk", flat=True
        )
    )


@transaction.atomic
def turn_record(*, turn: TurnRecord, reap: Reap) -> PreparedTurn:
    thread = thread_get_or_create_for_turn(
        thread_id=turn.thread_id, user=turn.user, agent_name=turn.agent_name
    )
    active = _active_runs(thread.pk)
    if active:
        reap(active)
        if _active_runs(thread.pk):
            raise ThreadBusy(thread.thread_id)
    run = run_create(
        thread=thread,
        agent_name=turn.agent_name,
        protocol=turn.protocol,
        request_type=turn.request_type,
        previous_run_id=turn.previous_run_id,
        run_id=turn.run_id,
        executor=turn.executor,
    )
    new_ids = messages_sync_input(thread=thread, messages=turn.messages, run=run)
    if turn.start_running:
        run_mark_running(run_id=run.id)
    latest = (
        agent_state_latest(thread=thread, agent_name=turn.agent_name) if turn.want_state else None
    )
    latest_state = dict(latest.state) if latest is not None else None
    if turn.request_payload_for is not None:
        kept = turn.request_payload_for(latest_state)
        if kept is not None:
            run.request_payload = kept
            run.save(update_fields=["request_payload"])
    return PreparedTurn(
        run_id=run.id,
        thread_id=thread.thread_id,
        thread_pk=thread.pk,
        latest_state=latest_state,
        new_message_ids=tuple(new_ids),
    )


@transaction.atomic
def _record(*, run_id: str, progress: Progress) -> None:
    run_record_progress(
        run_id=run_id,
        events=progress.events,
        messages=progress.messages,
        agent_states=progress.agent_states,
        first_token_at=progress.first_token_at,
        outcome=progress.outcome,
    )
    if progress.trace is not None:
        spans.spans_store(run_id=run_id, trace=progress.trace)


def _logged_only(progress: Progress) -> bool:
    return not (progress.messages or progress.agent_states or progress.outcome or progress.trace)


@transaction.atomic
def _record_many(*, entries: Sequence[RunProgress]) -> None:
    for entry in entries:
        start = entry.progress.start
        if start is not None:  # before its end, which then overrides the status
            run_record_start(run_id=entry.run_id, started_at=start.started_at, model=start.model)
    # The runs' log entries alone (their mid-run batches) in one bulk insert.
    logs = [entry for entry in entries if _logged_only(entry.progress)]
    if logs:
        runs_log_batches(
            batches=[(entry.run_id, entry.progress.events) for entry in logs],
            first_tokens=[
                (entry.run_id, entry.progress.first_token_at)
                for entry in logs
                if entry.progress.first_token_at is not None
            ],
        )
    for entry in entries:
        if not _logged_only(entry.progress):
            _record(run_id=entry.run_id, progress=entry.progress)


class OrmTurnStore:
    async def prepare(self, *, turn: TurnRecord, reap: Reap) -> PreparedTurn:
        return await on_store_thread(turn_record, turn=turn, reap=reap)

    async def mark_running(self, *, run_id: str, model: str) -> bool:
        return await on_store_thread(run_mark_running, run_id=run_id, model=model)

    async def check(self) -> None:
        await on_store_thread(_select_one)

    async def record(self, *, run_id: str, thread_pk: int | None, progress: Progress) -> None:
        await self.record_many(entries=[RunProgress(run_id, thread_pk, progress)])

    async def record_many(self, *, entries: Sequence[RunProgress]) -> None:
        await on_store_thread(_record_many, entries=entries)

    async def heartbeats(self, *, run_ids: list[str]) -> set[str]:
        return await on_store_thread(run_heartbeats, run_ids=run_ids)

    async def store_trace(self, *, run_id: str, trace: SpanWrite) -> None:
        await on_store_thread(spans.spans_store, run_id=run_id, trace=trace)

    async def read_log(
        self, *, run_id: str, after_seq: int, before_seq: int | None, limit: int
    ) -> list[LoggedEvent]:
        return await on_store_thread(
            run_log_read, run_id=run_id, after_seq=after_seq, before_seq=before_seq, limit=limit
        )
