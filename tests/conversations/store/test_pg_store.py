"""The raw-SQL store writes exactly what the ORM services write, read back through the ORM.

Each scenario runs twice on the same inputs, once through ``PgTurnStore`` and once through the
ORM store (``turn_record`` and ``run_record_progress``), on two threads, and the rows the ORM
reads back are compared field by field (ids and clocks aside).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError
from django.utils import timezone

from conversations.models import AgentState, Message, Run, RunEvent, RunStatus, Span, Thread
from conversations.services.messages import OutputMessage
from conversations.services.runs import LoggedEvent, RunOutcome, ThreadBusy, Usage
from conversations.store.orm import OrmTurnStore
from conversations.store.pg import look_up as pg_look_up
from conversations.store.pg import turn_write
from conversations.store.pg.look_up import (
    LOOK_JOINED,
    LOOK_PROBED,
    LookUp,
    look_ups_statement,
)
from conversations.store.pg.pools import POOLS, SESSION_SETUP, conninfo
from conversations.store.pg.progress import progress_statement
from conversations.store.pg.store import PgTurnStore
from conversations.store.types import (
    PreparedTurn,
    Progress,
    RunProgress,
    RunStart,
    SpanWrite,
    TurnRecord,
)
from copilot_runtime.events.request import InputMessage
from copilot_runtime.history import HISTORIES
from copilot_runtime.tracing.records import SpanRecord

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGE_FIELDS = (
    "position",
    "message_id",
    "kind",
    "role",
    "content",
    "action_name",
    "arguments",
    "parent_message_id",
    "action_execution_id",
    "result",
    "image_format",
    "image_bytes",
    "status",
    "status_reason",
    "superseded",
)
RUN_FIELDS = (
    "agent_name",
    "protocol",
    "request_type",
    "previous_run_id",
    "status",
    "error_code",
    "error_details",
    "limit_trips",
    "model",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
    "request_payload",
    "cancel_requested",
    "attempts",
)


def never_reap(run_ids: list[str]) -> int:
    return 0


def text(message_id: str, role: str, content: str) -> InputMessage:
    return InputMessage(id=message_id, kind="text", role=role, content=content)


def history(*pairs: str) -> list[InputMessage]:
    messages = [text("sys", "system", "You are helpful.")]
    for index, content in enumerate(pairs):
        role = "user" if index % 2 == 0 else "assistant"
        messages.append(text(f"m{index}", role, content))
    return messages


def record(thread_id: str, messages: list[InputMessage], **extra: Any) -> TurnRecord:
    """A turn's record as ``turn_start`` makes it, with its request's history entered as the
    protocol surfaces enter it (what the process knows the thread holds: copilot_runtime/
    history)."""
    user = extra.pop("user", AnonymousUser())
    if "history" not in extra:
        owner = user.pk if user.is_authenticated else None
        extra["history"] = HISTORIES.enter("test", messages, thread=(owner, thread_id))
    return TurnRecord(
        thread_id=thread_id,
        user=user,
        agent_name="default",
        protocol=extra.pop("protocol", "agui"),
        executor=extra.pop("executor", "inline"),
        request_type="Chat",
        previous_run_id="",
        messages=messages,
        run_id=extra.pop("run_id", str(uuid.uuid4())),
        **extra,
    )


def messages_of(thread_id: str) -> list[tuple[Any, ...]]:
    return [
        tuple(getattr(m, f) for f in MESSAGE_FIELDS)
        for m in Message.objects.filter(thread__thread_id=thread_id).order_by("position")
    ]


def run_of(run_id: str) -> tuple[Any, ...]:
    run = Run.objects.get(pk=run_id)
    return tuple(getattr(run, f) for f in RUN_FIELDS)


async def both(
    pg: PgTurnStore, turns: list[list[InputMessage]], **extra: Any
) -> tuple[list[str], list[str]]:
    """Run the same turns through each store on its own thread; returns the run ids."""
    orm = OrmTurnStore()
    run_ids: tuple[list[str], list[str]] = ([], [])
    for store, thread_id, ids in ((pg, "t-sql", run_ids[0]), (orm, "t-orm", run_ids[1])):
        for messages in turns:
            prepared = await store.prepare(
                turn=record(thread_id, [*messages], **dict(extra)), reap=never_reap
            )
            ids.append(prepared.run_id)
            if prepared.stored is not None:
                await prepared.stored
            await succeed(store, prepared)
    return run_ids


async def succeed(
    store: PgTurnStore | OrmTurnStore, prepared: PreparedTurn, *, reply: str | None = None
) -> None:
    """The run's end, succeeded, with its assistant ``reply`` (a message id) if any."""
    await store.record(
        run_id=prepared.run_id,
        thread_pk=prepared.thread_pk,
        progress=Progress(
            events=[],
            messages=[OutputMessage(message_id=reply, kind="text", role="assistant")]
            if reply
            else [],
            agent_states=[],
            outcome=RunOutcome(status=RunStatus.SUCCEEDED, usage=Usage()),
            first_position=prepared.next_position,
        ),
    )


async def test_a_first_turn_stores_the_same_thread_run_and_messages(pg: PgTurnStore) -> None:
    sql_runs, orm_runs = await both(pg, [history("Hello there")])

    assert await sync_to_async(messages_of)("t-sql") == await sync_to_async(messages_of)("t-orm")
    stored = await sync_to_async(messages_of)("t-sql")
    assert [row[1] for row in stored] == ["m0"]  # the client's system message is not stored
    assert await sync_to_async(run_of)(sql_runs[0]) == await sync_to_async(run_of)(orm_runs[0])
    sql_thread, orm_thread = [await Thread.objects.aget(thread_id=t) for t in ("t-sql", "t-orm")]
    assert (sql_thread.title, sql_thread.status, sql_thread.owner_id, sql_thread.metadata) == (
        orm_thread.title,
        orm_thread.status,
        orm_thread.owner_id,
        orm_thread.metadata,
    )
    assert sql_thread.title == "Hello there"
    # Where the run executes, written with its row by either store.
    for run_id in (sql_runs[0], orm_runs[0]):
        assert (await Run.objects.aget(pk=run_id)).executor == "inline"


async def test_a_growing_history_appends_only_the_new_messages(pg: PgTurnStore) -> None:
    turns = [
        history("one"),
        history("one", "two", "three"),
        history("one", "two", "three", "4", "5"),
    ]
    await both(pg, turns)

    sql = await sync_to_async(messages_of)("t-sql")
    assert sql == await sync_to_async(messages_of)("t-orm")
    assert [row[0] for row in sql] == [0, 1, 2, 3, 4]


async def test_new_messages_among_stored_ones_and_repeated_ids_are_stored_like_the_orm(
    pg: PgTurnStore,
) -> None:
    # New messages before, between and after stored ones take the next positions in the
    # history's order; an id the request repeats is stored once, as its first message.
    first = history("one", "two")
    later = [
        text("sys", "system", "You are helpful."),
        text("before", "user", "inserted first"),
        text("m0", "user", "one"),
        text("between", "assistant", "inserted between"),
        text("m1", "assistant", "two"),
        text("after", "user", "three"),
        text("between", "assistant", "a repeat of an id"),
        text("last", "assistant", "four"),
    ]
    await both(pg, [first, later])

    sql = await sync_to_async(messages_of)("t-sql")
    assert sql == await sync_to_async(messages_of)("t-orm")
    assert [(row[0], row[1]) for row in sql] == [
        (0, "m0"),
        (1, "m1"),
        (2, "before"),
        (3, "between"),
        (4, "after"),
        (5, "last"),
    ]
    assert next(row for row in sql if row[1] == "between")[4] == "inserted between"


async def test_a_diverging_history_supersedes_and_restores_like_the_orm(pg: PgTurnStore) -> None:
    edited = history("one", "two")
    edited[-1] = text("m1-edit", "assistant", "two, regenerated")
    turns = [history("one", "two"), edited, history("one", "two", "three")]
    await both(pg, turns)

    sql = await sync_to_async(messages_of)("t-sql")
    assert sql == await sync_to_async(messages_of)("t-orm")
    superseded = {row[1] for row in sql if row[-1]}
    assert superseded == {"m1-edit"}  # m1 was restored by the last turn, the edit superseded


async def test_the_prepared_turn_names_the_new_messages_and_the_latest_state(
    pg: PgTurnStore,
) -> None:
    first = await pg.prepare(turn=record("t-state", history("a")), reap=never_reap)
    await pg.record(
        run_id=first.run_id,
        thread_pk=first.thread_pk,
        progress=Progress(
            events=[],
            messages=[],
            agent_states=[
                {
                    "agent_name": "default",
                    "state": {"count": 3},
                    "node_name": "",
                    "run_id": first.run_id,
                    "active": False,
                    "running": False,
                }
            ],
            outcome=RunOutcome(status=RunStatus.SUCCEEDED, usage=Usage()),
        ),
    )
    second = await pg.prepare(turn=record("t-state", history("a", "b", "c")), reap=never_reap)

    assert first.new_message_ids == ("m0",)
    assert second.new_message_ids == ("m1", "m2")
    assert second.latest_state == {"count": 3}


async def test_a_busy_thread_is_refused_and_a_reaped_one_is_not(pg: PgTurnStore) -> None:
    first = await pg.prepare(turn=record("t-busy", history("a")), reap=never_reap)
    with pytest.raises(ThreadBusy):
        await pg.prepare(turn=record("t-busy", history("a", "b", "c")), reap=never_reap)
    assert await pg.mark_running(run_id=first.run_id, model="m") is True

    reaped: list[list[str]] = []

    def reap(run_ids: list[str]) -> int:
        reaped.append(run_ids)
        Run.objects.filter(pk__in=run_ids).update(status=RunStatus.FAILED)
        return len(run_ids)

    second = await pg.prepare(turn=record("t-busy", history("a", "b", "c")), reap=reap)
    assert reaped == [[first.run_id]]
    assert (await Run.objects.aget(pk=second.run_id)).status == RunStatus.PENDING


async def test_another_callers_thread_id_starts_a_thread_of_their_own(
    pg: PgTurnStore, django_user_model: Any
) -> None:
    owner = await django_user_model.objects.acreate(username="owner")
    mine = await pg.prepare(turn=record("t-owned", history("mine"), user=owner), reap=never_reap)
    theirs = await pg.prepare(turn=record("t-owned", history("theirs")), reap=never_reap)

    assert theirs.thread_pk != mine.thread_pk
    stored = {
        (m.thread.owner_id, m.content)
        async for m in Message.objects.filter(thread__thread_id="t-owned").select_related("thread")
    }
    assert stored == {(owner.pk, "mine"), (None, "theirs")}


async def test_a_reused_run_id_is_an_integrity_error(pg: PgTurnStore) -> None:
    await pg.prepare(turn=record("t-a", history("a"), run_id="run-1"), reap=never_reap)
    with pytest.raises(IntegrityError):
        await pg.prepare(turn=record("t-b", history("b"), run_id="run-1"), reap=never_reap)
    # The write failed whole: no run, no message of the second thread.
    assert not await Message.objects.filter(thread__thread_id="t-b").aexists()
    assert await Run.objects.filter(thread__thread_id="t-b").acount() == 0


async def test_two_requests_racing_on_one_thread_start_one_run(pg: PgTurnStore) -> None:
    import asyncio

    outcomes = await asyncio.gather(
        *(pg.prepare(turn=record("t-race", history("a")), reap=never_reap) for _ in range(4)),
        return_exceptions=True,
    )

    started = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(started) == 1
    assert refused and all(isinstance(o, ThreadBusy) for o in refused)
    assert await Run.objects.filter(thread__thread_id="t-race").acount() == 1
    assert await Message.objects.filter(thread__thread_id="t-race").acount() == 1


# --- look-ups grouped per event loop ---------------------------------------------------------


def look_up_groups(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The thread ids of each look-up statement from now on (patch before the test's first
    look-up: the loop's group is made then)."""
    groups: list[list[str]] = []
    real = pg_look_up.look_many

    async def counted(asked: Any) -> None:
        groups.append([one.look_up.thread_id for one in asked])
        await real(asked)

    monkeypatch.setattr(pg_look_up, "look_many", counted)
    return groups


async def test_turns_prepared_together_share_a_look_up_and_each_reads_its_own_thread(
    pg: PgTurnStore, monkeypatch: pytest.MonkeyPatch, django_user_model: Any
) -> None:
    groups = look_up_groups(monkeypatch)
    owner = await django_user_model.objects.acreate(username="owner-grouped")
    await pg.prepare(turn=record("t-owned", history("mine"), user=owner), reap=never_reap)
    continued = await pg.prepare(turn=record("t-continued", history("a", "b")), reap=never_reap)
    await succeed(pg, continued)
    await pg.prepare(turn=record("t-busy", history("a")), reap=never_reap)  # left pending
    groups.clear()

    outcomes = await asyncio.gather(
        pg.prepare(turn=record("t-first", history("x")), reap=never_reap),
        pg.prepare(turn=record("t-continued", history("a", "b", "c")), reap=never_reap),
        pg.prepare(turn=record("t-fresh", history("y", "z", "w")), reap=never_reap),
        pg.prepare(turn=record("t-owned", history("theirs")), reap=never_reap),
        pg.prepare(turn=record("t-busy", history("a", "b", "c")), reap=never_reap),
        return_exceptions=True,
    )

    # The first is looked up at once; the four that came meanwhile share the next statement.
    assert groups == [["t-first"], ["t-continued", "t-fresh", "t-owned", "t-busy"]]
    first, grown, fresh, own, busy = outcomes
    assert isinstance(busy, ThreadBusy)
    pks = {t.thread_id: t.pk async for t in Thread.objects.filter(owner__isnull=True)}
    # The anonymous caller's "t-owned" is a thread of its own, beside the owner's.
    assert isinstance(own, PreparedTurn) and own.thread_pk == pks["t-owned"]
    assert isinstance(first, PreparedTurn) and first.thread_pk == pks["t-first"]
    assert isinstance(grown, PreparedTurn) and grown.thread_pk == pks["t-continued"]
    assert isinstance(fresh, PreparedTurn) and fresh.thread_pk == pks["t-fresh"]
    # Each read its own thread's messages: the continued one adds one after its two.
    assert grown.new_message_ids == ("m2",) and grown.next_position == 3
    assert fresh.new_message_ids == ("m0", "m1", "m2") and fresh.next_position == 3
    owned = Message.objects.filter(thread__thread_id="t-owned", thread__owner=owner)
    assert [m.content async for m in owned] == ["mine"]
    assert [m[1] for m in await sync_to_async(messages_of)("t-busy")] == ["m0"]


async def test_a_look_up_the_database_refuses_fails_its_own_turn_only(
    pg: PgTurnStore, monkeypatch: pytest.MonkeyPatch, django_user_model: Any
) -> None:
    groups = look_up_groups(monkeypatch)
    gone = await django_user_model.objects.acreate(username="gone")
    await django_user_model.objects.filter(pk=gone.pk).adelete()  # its session outlived it

    outcomes = await asyncio.gather(
        pg.prepare(turn=record("t-one", history("x")), reap=never_reap),
        pg.prepare(turn=record("t-two", history("x")), reap=never_reap),
        pg.prepare(turn=record("t-gone", history("x"), user=gone), reap=never_reap),
        pg.prepare(turn=record("t-three", history("x")), reap=never_reap),
        return_exceptions=True,
    )

    assert isinstance(outcomes[2], IntegrityError)  # its new thread names no user
    assert all(isinstance(o, PreparedTurn) for o in (outcomes[0], outcomes[1], outcomes[3]))
    # The shared statement failed whole, then each of its turns was looked up alone.
    assert groups == [
        ["t-one"],
        ["t-two", "t-gone", "t-three"],
        ["t-two"],
        ["t-gone"],
        ["t-three"],
    ]
    stored = sorted([t.thread_id async for t in Thread.objects.all()])
    assert stored == ["t-one", "t-three", "t-two"]


async def _until_blocked_by(holder: psycopg.AsyncConnection, within: float = 10) -> None:
    """Returns once another backend waits on a lock ``holder``'s transaction holds."""
    async with await psycopg.AsyncConnection.connect(conninfo(), autocommit=True) as watcher:
        deadline = asyncio.get_running_loop().time() + within
        while True:
            cursor = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                [holder.info.backend_pid],
            )
            row = await cursor.fetchone()
            if row and row[0]:
                return
            assert asyncio.get_running_loop().time() < deadline, "no one waited on the lock"
            await asyncio.sleep(0.01)


async def test_a_thread_created_meanwhile_by_another_request_is_looked_up_again(
    pg: PgTurnStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look-up's insert waits for another transaction creating the same thread; once that
    commits, the thread is not in the statement's snapshot: it asks again and finds it."""
    groups = look_up_groups(monkeypatch)
    other = await psycopg.AsyncConnection.connect(conninfo())
    try:
        await other.execute(
            "INSERT INTO conversations_thread (thread_id, owner_id, agent_name, title, metadata,"
            " status, created_at, updated_at)"
            " VALUES ('t-late', NULL, 'default', 'theirs', '{}', 'idle', now(), now())"
        )
        preparing = asyncio.ensure_future(
            pg.prepare(turn=record("t-late", history("x")), reap=never_reap)
        )
        # The look-up waits on the uncommitted row (a fixed sleep let a slow host commit before
        # the look-up had even started, and it found the thread at once).
        await _until_blocked_by(other)
        assert not preparing.done()
        await other.commit()
        prepared = await asyncio.wait_for(preparing, timeout=5)
    finally:
        await other.close()

    assert groups == [["t-late"], ["t-late"]]
    thread = await Thread.objects.aget(thread_id="t-late")
    assert prepared.thread_pk == thread.pk and thread.title == "theirs"


# --- a run started while its turn's write is in flight -------------------------------------


async def test_a_turn_started_before_it_is_stored_writes_what_the_orm_writes(
    pg: PgTurnStore,
) -> None:
    turns = [history("a"), history("a", "b", "c"), history("a", "b", "c", "d", "e")]
    sql_runs, orm_runs = await both(pg, turns, start_running=True, start_before_stored=True)

    assert await sync_to_async(messages_of)("t-sql") == await sync_to_async(messages_of)("t-orm")
    for sql_run, orm_run in zip(sql_runs, orm_runs, strict=True):
        assert await sync_to_async(run_of)(sql_run) == await sync_to_async(run_of)(orm_run)


async def _hold_thread_row(thread_id: str, how: str = "lock") -> Any:
    """Another connection's lock on the thread row (``lock``), or its update not committed yet
    (``update``, as a run's end in flight): the turn's write (which updates the row) waits on
    it; reading the thread does not."""
    holder = await psycopg.AsyncConnection.connect(conninfo())
    if how == "lock":
        await holder.execute(
            "SELECT 1 FROM conversations_thread WHERE thread_id = %s FOR UPDATE", [thread_id]
        )
    else:
        await holder.execute(
            "UPDATE conversations_thread SET updated_at = now() WHERE thread_id = %s", [thread_id]
        )
    return holder


@pytest.mark.parametrize("how", ["lock", "update"])
async def test_a_turn_started_before_it_is_stored_is_prepared_while_its_write_waits(
    pg: PgTurnStore, how: str
) -> None:
    first = await pg.prepare(turn=record("t-ahead", history("a")), reap=never_reap)
    await pg.record(run_id=first.run_id, thread_pk=first.thread_pk, progress=finished())
    holder = await _hold_thread_row("t-ahead", how)
    try:
        prepared = await asyncio.wait_for(
            pg.prepare(
                turn=record(
                    "t-ahead",
                    history("a", "b", "c"),
                    start_running=True,
                    start_before_stored=True,
                ),
                reap=never_reap,
            ),
            timeout=5,
        )
        assert prepared.new_message_ids == ("m1", "m2")
        assert first.next_position is not None
        assert prepared.next_position == first.next_position + 2
        assert prepared.stored is not None
        await _until_blocked_by(holder)
        assert not prepared.stored.done()  # the write waits on the lock
        assert not await Run.objects.filter(pk=prepared.run_id).aexists()
    finally:
        await holder.rollback()
        await holder.close()

    await asyncio.wait_for(prepared.stored, timeout=5)
    run = await Run.objects.aget(pk=prepared.run_id)
    assert run.status == RunStatus.RUNNING
    assert [m[1] for m in await sync_to_async(messages_of)("t-ahead")] == ["m0", "m1", "m2"]


async def write_raced(
    pg: PgTurnStore, thread_id: str, blind_to_active_runs: Callable[[], None]
) -> PreparedTurn:
    """A turn (m0) left pending on ``thread_id``, then one that reads the thread as free and
    starts before its write (m0-m2), which fails with ThreadBusy; the second one, prepared."""
    await pg.prepare(turn=record(thread_id, history("a")), reap=never_reap)  # still pending
    blind_to_active_runs()
    prepared = await pg.prepare(
        turn=record(
            thread_id, history("a", "b", "c"), start_running=True, start_before_stored=True
        ),
        reap=never_reap,
    )
    assert prepared.stored is not None
    with pytest.raises(ThreadBusy):
        await prepared.stored
    return prepared


async def test_a_turn_whose_write_fails_after_it_was_read_stores_nothing(
    pg: PgTurnStore, blind_to_active_runs: Callable[[], None]
) -> None:
    """A request that raced another onto the thread (its read saw no active run, the other's
    run was written first): ``stored`` fails with ThreadBusy and the write is undone whole."""
    prepared = await write_raced(pg, "t-raced", blind_to_active_runs)
    assert not await Run.objects.filter(pk=prepared.run_id).aexists()
    assert [m[1] for m in await sync_to_async(messages_of)("t-raced")] == ["m0"]


async def test_a_turn_refused_before_its_write_fails_in_prepare_itself(
    pg: PgTurnStore, django_user_model: Any
) -> None:
    owner = await django_user_model.objects.acreate(username="owner-ahead")
    await pg.prepare(turn=record("t-theirs", history("mine"), user=owner), reap=never_reap)
    # Another caller's turn on the id is on a thread of its own, which nothing keeps busy.
    other = await pg.prepare(
        turn=record("t-theirs", history("x"), start_running=True, start_before_stored=True),
        reap=never_reap,
    )
    assert other.stored is not None
    await other.stored
    with pytest.raises(ThreadBusy):
        await pg.prepare(
            turn=record("t-theirs", history("mine", "y"), user=owner, start_before_stored=True),
            reap=never_reap,
        )


def finished() -> Progress:
    return Progress(
        events=[],
        messages=[],
        agent_states=[],
        outcome=RunOutcome(status=RunStatus.SUCCEEDED, usage=Usage()),
    )


def progress_batches(run_id: str) -> list[Progress]:
    now = timezone.now()
    answer = OutputMessage(
        message_id="answer", kind="text", role="assistant", content="Hi!", created_at=now
    )
    call = OutputMessage(
        message_id="call-1",
        kind="action_execution",
        role="assistant",
        action_name="lookup",
        arguments={"q": "x"},
        parent_message_id="answer",
        created_at=now,
    )
    return [
        Progress(
            events=[LoggedEvent(seq=1, type="text_start", payload={"message_id": "answer"})],
            messages=[],
            agent_states=[],
            first_token_at=now,
        ),
        Progress(
            events=[
                LoggedEvent(seq=2, type="text_delta", payload={"delta": "Hi!"}),
                LoggedEvent(seq=3, type="run_finished", payload={"status": "succeeded"}),
            ],
            messages=[answer, call],
            agent_states=[
                {
                    "agent_name": "default",
                    "state": {"todos": [1, 2]},
                    "node_name": "n",
                    "run_id": run_id,
                    "active": True,
                    "running": False,
                }
            ],
            outcome=RunOutcome(
                status=RunStatus.SUCCEEDED,
                usage=Usage(input_tokens=5, output_tokens=7, cached_input_tokens=1),
                limit_trips=[{"kind": "tool_breaker"}],
            ),
            interrupted=True,
        ),
    ]


async def test_progress_and_the_runs_end_are_written_like_the_orm_writes_them(
    pg: PgTurnStore,
) -> None:
    orm = OrmTurnStore()
    results = []
    for store, thread_id in ((pg, "p-sql"), (orm, "p-orm")):
        prepared = await store.prepare(turn=record(thread_id, history("q")), reap=never_reap)
        assert await store.mark_running(run_id=prepared.run_id, model="gpt-x") is True
        assert await store.mark_running(run_id=prepared.run_id, model="gpt-x") is False
        for batch in progress_batches(prepared.run_id):
            if batch.interrupted:
                # The interrupt's meta event, as the engine logs it (the ORM store reads it).
                batch.events.insert(
                    0,
                    LoggedEvent(
                        seq=90, type="meta_event", payload={"name": "LangGraphInterruptEvent"}
                    ),
                )
            await store.record(run_id=prepared.run_id, thread_pk=None, progress=batch)
        results.append(prepared)

    sql, orm_run = results
    assert await sync_to_async(messages_of)("p-sql") == await sync_to_async(messages_of)("p-orm")
    assert await sync_to_async(run_of)(sql.run_id) == await sync_to_async(run_of)(orm_run.run_id)
    sql_row = await Run.objects.aget(pk=sql.run_id)
    assert sql_row.status == RunStatus.INTERRUPTED
    assert sql_row.first_token_at is not None and sql_row.finished_at is not None
    assert (await Thread.objects.aget(thread_id="p-sql")).status == "interrupted"

    def log(run_id: str) -> list[tuple[Any, ...]]:
        return list(RunEvent.objects.filter(run_id=run_id).values_list("seq", "type", "payload"))

    assert await sync_to_async(log)(sql.run_id) == await sync_to_async(log)(orm_run.run_id)

    def states(thread_id: str) -> list[tuple[Any, ...]]:
        return list(
            AgentState.objects.filter(thread__thread_id=thread_id).values_list(
                "agent_name", "state", "config", "node_name", "active", "running"
            )
        )

    assert await sync_to_async(states)("p-sql") == await sync_to_async(states)("p-orm")


async def test_a_follower_reads_the_same_log_through_either_store(pg: PgTurnStore) -> None:
    prepared = await pg.prepare(turn=record("log-read", history("q")), reap=never_reap)
    for batch in progress_batches(prepared.run_id):
        await pg.record(run_id=prepared.run_id, thread_pk=None, progress=batch)
    orm = OrmTurnStore()

    for after_seq, before_seq, limit in (
        (0, None, 1000),
        (1, None, 1000),
        (0, 3, 1000),
        (0, None, 2),
    ):
        reads = [
            await store.read_log(
                run_id=prepared.run_id, after_seq=after_seq, before_seq=before_seq, limit=limit
            )
            for store in (pg, orm)
        ]
        assert reads[0] == reads[1], (after_seq, before_seq, limit)
    whole = await pg.read_log(run_id=prepared.run_id, after_seq=0, before_seq=None, limit=1000)
    assert [(e.seq, e.type) for e in whole] == [
        (1, "text_start"),
        (2, "text_delta"),
        (3, "run_finished"),
    ]
    assert whole[1].payload == {"delta": "Hi!"}
    between = await pg.read_log(run_id=prepared.run_id, after_seq=1, before_seq=3, limit=1000)
    assert [e.seq for e in between] == [2]


def several_runs_progress(
    run_ids: list[str], prepared: list[PreparedTurn], first: dt.datetime, trace_id: str
) -> list[RunProgress]:
    """What four runs hand over at the same moment: log entries alone, log entries with the
    first token's time, nothing but that time, and a whole end (messages after the thread's
    last one, a state, the end interrupted, spans and cost) of a run whose thread is looked up."""
    end = progress_batches(run_ids[3])[1]
    # The interrupt's meta event, as the engine logs it (the ORM store reads it).
    end.events.append(
        LoggedEvent(seq=4, type="meta_event", payload={"name": "LangGraphInterruptEvent"})
    )
    end.trace = SpanWrite(
        trace_id=trace_id,
        records=[
            SpanRecord(
                key="run",
                span_id="c" * 16,
                parent_span_id="",
                kind="run",
                name="run",
                started_at=first.timestamp(),
                ended_at=first.timestamp() + 2,
            )
        ],
        cost=Decimal("0.25"),
        persist_spans=True,
    )
    return [
        RunProgress(
            run_ids[0],
            prepared[0].thread_pk,
            Progress(
                events=[LoggedEvent(seq=1, type="text_start", payload={"message_id": "a"})],
                messages=[],
                agent_states=[],
            ),
        ),
        RunProgress(
            run_ids[1],
            prepared[1].thread_pk,
            Progress(
                events=[
                    LoggedEvent(seq=4, type="text_delta", payload={"delta": "x y"}),
                    LoggedEvent(seq=5, type="text_delta", payload={"delta": "é"}),
                ],
                messages=[],
                agent_states=[],
                first_token_at=first,
            ),
        ),
        RunProgress(
            run_ids[2],
            prepared[2].thread_pk,
            Progress(
                events=[],
                messages=[],
                agent_states=[],
                first_token_at=first + dt.timedelta(seconds=1),
            ),
        ),
        RunProgress(run_ids[3], None, end),
    ]


async def test_several_runs_progress_is_written_like_the_orm_writes_it(pg: PgTurnStore) -> None:
    orm = OrmTurnStore()
    seen: list[Any] = []
    first = dt.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
    for store, prefix in ((pg, "many-sql"), (orm, "many-orm")):
        prepared = [
            await store.prepare(turn=record(f"{prefix}-{n}", history("q")), reap=never_reap)
            for n in range(4)
        ]
        run_ids = [turn.run_id for turn in prepared]
        trace_id = f"{len(seen):032x}"
        await store.record_many(entries=several_runs_progress(run_ids, prepared, first, trace_id))

        def written(run_ids: list[str] = run_ids) -> Any:
            events = [
                (run_ids.index(e.run_id), e.seq, e.type, e.payload, e.created_at is not None)
                for e in RunEvent.objects.filter(run_id__in=run_ids).order_by(
                    "run__thread_id", "seq"
                )
            ]
            runs = [
                (*run_of(run_id), run.first_token_at, run.cost, run.finished_at is not None)
                for run_id in run_ids
                for run in [Run.objects.get(pk=run_id)]
            ]
            threads = list(
                Thread.objects.filter(runs__id__in=run_ids)
                .order_by("id")
                .values_list("status", flat=True)
            )
            messages = [
                row[:-1] for row in messages_of(Run.objects.get(pk=run_ids[3]).thread.thread_id)
            ]
            spans = list(
                Span.objects.filter(run_id__in=run_ids).values_list(
                    "span_id", "kind", "started_at", "ended_at"
                )
            )
            states = list(
                AgentState.objects.filter(thread__runs__id=run_ids[3]).values_list(
                    "agent_name", "state", "node_name", "active", "running"
                )
            )
            return events, runs, threads, messages, spans, states

        seen.append(await sync_to_async(written)())
    for sql_part, orm_part in zip(seen[0], seen[1], strict=True):
        assert sql_part == orm_part
    events, runs, threads, messages, spans, states = seen[0]
    assert [row[:3] for row in events] == [
        (0, 1, "text_start"),
        (1, 4, "text_delta"),
        (1, 5, "text_delta"),
        (3, 2, "text_delta"),
        (3, 3, "run_finished"),
        (3, 4, "meta_event"),
    ]
    # (status, first token, cost, finished) of each run: only the last one ended.
    assert [(run[4], *run[-3:]) for run in runs] == [
        ("pending", None, None, False),
        ("pending", first, None, False),
        ("pending", first + dt.timedelta(seconds=1), None, False),
        ("interrupted", None, Decimal("0.25"), True),
    ]
    assert runs[3][9:12] == (5, 7, 1)  # its tokens
    assert threads == ["running", "running", "running", "interrupted"]
    assert [row[1] for row in messages] == ["m0", "answer", "call-1"]
    assert len(spans) == 1 and len(states) == 1


async def test_several_runs_progress_is_one_statement_that_fails_as_a_whole(
    pg: PgTurnStore,
) -> None:
    prepared = await pg.prepare(turn=record("many-fail", history("q")), reap=never_reap)
    other = await pg.prepare(turn=record("many-fail-2", history("q")), reap=never_reap)
    logged = Progress(
        events=[LoggedEvent(seq=1, type="text_start", payload={})], messages=[], agent_states=[]
    )
    await pg.record_many(entries=[RunProgress(other.run_id, other.thread_pk, logged)])
    with pytest.raises(IntegrityError):
        await pg.record_many(
            entries=[
                RunProgress(
                    prepared.run_id,
                    prepared.thread_pk,
                    Progress(
                        events=[LoggedEvent(seq=1, type="text_start", payload={})],
                        messages=[],
                        agent_states=[],
                        first_token_at=timezone.now(),
                    ),
                ),
                # The other run's first event again: its log refuses a second seq 1.
                RunProgress(other.run_id, other.thread_pk, logged),
            ]
        )
    assert await RunEvent.objects.filter(run_id=prepared.run_id).acount() == 0
    assert (await Run.objects.aget(pk=prepared.run_id)).first_token_at is None


async def test_one_statement_never_carries_two_batches_of_one_run(pg: PgTurnStore) -> None:
    prepared = await pg.prepare(turn=record("many-twice", history("q")), reap=never_reap)
    entry = RunProgress(prepared.run_id, prepared.thread_pk, finished())
    with pytest.raises(ValueError):
        await pg.record_many(entries=[entry, entry])


async def test_heartbeats_tell_which_runs_were_asked_to_stop(pg: PgTurnStore) -> None:
    runs = []
    for thread in ("t-hb-1", "t-hb-2"):
        prepared = await pg.prepare(turn=record(thread, history("a")), reap=never_reap)
        await pg.mark_running(run_id=prepared.run_id, model="m")
        runs.append(prepared.run_id)
    assert await pg.heartbeats(run_ids=runs) == set()
    await Run.objects.filter(pk=runs[1]).aupdate(cancel_requested=True)
    assert await pg.heartbeats(run_ids=runs) == {runs[1]}
    assert await Run.objects.filter(pk__in=runs, heartbeat_at=None).acount() == 0


def started_row(run_id: str) -> tuple[Any, ...]:
    run = Run.objects.get(pk=run_id)
    return (run.status, run.started_at, run.heartbeat_at, run.attempts, run.model)


async def test_a_start_carried_by_a_runs_writes_is_recorded_once_like_the_orm_records_it(
    pg: PgTurnStore,
) -> None:
    """A run claimed outside the database (engine/claims.py) is recorded running by its first
    write, or, written first with its end, goes straight from pending to that end."""
    orm = OrmTurnStore()
    started = dt.datetime(2026, 1, 1, 12, 0, 0, 250000, tzinfo=dt.UTC)
    later = RunStart(started_at=started + dt.timedelta(seconds=5), model="other")
    seen = []
    for store, prefix in ((pg, "start-sql"), (orm, "start-orm")):
        long = await store.prepare(turn=record(f"{prefix}-long", history("q")), reap=never_reap)
        short = await store.prepare(turn=record(f"{prefix}-short", history("q")), reap=never_reap)
        first_batch = Progress(
            events=[LoggedEvent(seq=1, type="text_start", payload={"message_id": "a"})],
            messages=[],
            agent_states=[],
            start=RunStart(started_at=started, model="gpt-x"),
        )
        end = finished()
        end.start = RunStart(started_at=started, model="gpt-y")
        await store.record_many(
            entries=[
                RunProgress(long.run_id, long.thread_pk, first_batch),
                RunProgress(short.run_id, None, end),
            ]
        )
        long_running = await sync_to_async(started_row)(long.run_id)
        # A write carrying the start again (a retried batch) changes nothing of it.
        again = finished()
        again.start = later
        await store.record(run_id=long.run_id, thread_pk=long.thread_pk, progress=again)
        seen.append(
            (
                long_running,
                await sync_to_async(started_row)(long.run_id),
                await sync_to_async(started_row)(short.run_id),
            )
        )

    assert seen[0] == seen[1]
    long_running, long_ended, short_ended = seen[0]
    assert long_running == (RunStatus.RUNNING, started, started, 1, "gpt-x")
    assert long_ended == (RunStatus.SUCCEEDED, started, started, 1, "gpt-x")
    assert short_ended == (RunStatus.SUCCEEDED, started, started, 1, "gpt-y")


async def test_a_heartbeat_records_a_runs_start_not_recorded_yet_like_the_orm(
    pg: PgTurnStore,
) -> None:
    orm = OrmTurnStore()
    seen = []
    for store, prefix in ((pg, "hb-start-sql"), (orm, "hb-start-orm")):
        claimed = await store.prepare(turn=record(f"{prefix}-c", history("a")), reap=never_reap)
        running = await store.prepare(turn=record(f"{prefix}-r", history("a")), reap=never_reap)
        await store.mark_running(run_id=running.run_id, model="m")
        marked = await sync_to_async(started_row)(running.run_id)
        runs = [claimed.run_id, running.run_id]

        assert await store.heartbeats(run_ids=runs) == set()
        first = await sync_to_async(started_row)(claimed.run_id)
        assert await store.heartbeats(run_ids=runs) == set()
        second = await sync_to_async(started_row)(claimed.run_id)
        other = await sync_to_async(started_row)(running.run_id)
        seen.append((first, second, marked, other))

    for first, second, marked, other in seen:
        assert first[0] == RunStatus.RUNNING and first[3] == 1
        assert first[1] is not None and first[2] is not None
        # Recorded once: the next beat renews the heartbeat alone.
        assert second[:2] == first[:2] and second[3] == 1 and second[2] >= first[2]
        # A run marked running keeps its start and attempts.
        assert other[0] == RunStatus.RUNNING and other[1] == marked[1] and other[3] == 1


async def test_spans_and_cost_are_stored(pg: PgTurnStore) -> None:
    prepared = await pg.prepare(turn=record("t-span", history("a")), reap=never_reap)
    started = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()
    records = [
        SpanRecord(
            key="run",
            span_id="a" * 16,
            parent_span_id="",
            kind="run",
            name="run",
            started_at=started,
            ended_at=started + 1,
        ),
        SpanRecord(
            key="generation-1",
            span_id="b" * 16,
            parent_span_id="a" * 16,
            kind="generation",
            name="chat gpt-x",
            started_at=started,
            ended_at=started + 0.5,
            attributes={
                "gen_ai.request.model": "gpt-x",
                "gen_ai.usage.input_tokens": 1_000_000,
                "gen_ai.usage.output_tokens": 1_000_000,
            },
        ),
    ]
    # Priced by the tracer before the write: the store writes what it is given.
    trace = SpanWrite(trace_id="f" * 32, records=records, cost=Decimal(3), persist_spans=True)
    await pg.store_trace(run_id=prepared.run_id, trace=trace)

    assert str((await Run.objects.aget(pk=prepared.run_id)).cost) == "3.0000000000"
    spans = [s async for s in Span.objects.filter(run_id=prepared.run_id).order_by("span_id")]
    assert [(s.kind, s.ended_at - s.started_at) for s in spans] == [
        ("run", dt.timedelta(seconds=1)),
        ("generation", dt.timedelta(seconds=0.5)),
    ]


async def test_a_nul_character_from_the_model_is_stored_as_a_replacement_not_a_failure(
    pg: PgTurnStore,
) -> None:
    prepared = await pg.prepare(turn=record("t-nul", history("a")), reap=never_reap)
    call = OutputMessage(
        message_id="call-nul",
        kind="action_execution",
        role="assistant",
        action_name="lookup",
        arguments={"a": "x\x00y"},
        created_at=timezone.now(),
    )
    await pg.record(
        run_id=prepared.run_id,
        thread_pk=prepared.thread_pk,
        progress=Progress(
            events=[LoggedEvent(seq=1, type="action_args", payload={"delta": '{"a":"x\\u0000'})],
            messages=[call],
            agent_states=[],
            outcome=RunOutcome(status=RunStatus.SUCCEEDED, usage=Usage()),
        ),
    )

    stored = await Message.objects.aget(message_id="call-nul")
    assert stored.arguments == {"a": "x\ufffdy"}
    assert (await Run.objects.aget(pk=prepared.run_id)).status == RunStatus.SUCCEEDED
    event = await RunEvent.objects.aget(run_id=prepared.run_id)
    assert event.payload == {"delta": '{"a":"x\\u0000'}  # the text of an escape is kept


def _explain_look(thread_id: str, carried: list[str]) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """The look-up's row for ``carried`` ids on ``thread_id``, and its EXPLAIN ANALYZE plan."""
    look_up = LookUp(thread_id, None, "default", carried, None, timezone.now())
    plan, rows = _explain_look_ups([look_up])
    return plan, rows[0][1:]


def _explain_look_ups(
    look_ups: list[Any], *, statement: str | None = None
) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """The grouped look-up's rows and EXPLAIN ANALYZE plan, planned as the runtime runs it: on
    a connection set up as the store's (SESSION_SETUP), with the generic plan psycopg's
    prepared statement gets from its sixth run on. ``statement``: another text of it."""
    from django.db import connection

    sql, params = look_ups_statement(look_ups)
    sql = statement or sql
    with connection.cursor() as cursor:
        cursor.execute(SESSION_SETUP)
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        cursor.execute("PREPARE look_ups(text) AS " + sql.replace("%s", "$1"))
        try:
            cursor.execute("EXECUTE look_ups(%s)", params)
            rows = [tuple(row) for row in cursor.fetchall()]
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE look_ups(%s)", params)
            plan = cursor.fetchone()[0][0]["Plan"]
        finally:
            cursor.execute("DEALLOCATE look_ups")
            cursor.execute("RESET plan_cache_mode")
            cursor.execute("RESET enable_seqscan")
    return plan, rows


def _rows_handled(plan: dict[str, Any]) -> int:
    """Rows every node of an EXPLAIN ANALYZE plan produced or filtered away, over its loops."""
    loops = plan.get("Actual Loops", 1)
    own = plan.get("Actual Rows", 0) * loops
    own += plan.get("Rows Removed by Join Filter", 0) + plan.get("Rows Removed by Filter", 0)
    return own + sum(_rows_handled(child) for child in plan.get("Plans", []))


async def test_looking_up_a_long_threads_history_is_linear_in_its_length(pg: PgTurnStore) -> None:
    # Each turn re-sends the whole history: a look-up comparing every stored message with
    # every carried id made the 120th turn's preparation cost ten times the first's.
    long_history = history(*[f"turn {n}" for n in range(160)])
    await pg.prepare(turn=record("t-long", long_history), reap=never_reap)
    await Run.objects.filter(thread__thread_id="t-long").aupdate(status=RunStatus.SUCCEEDED)
    carried = [m.id for m in long_history if m.role != "system"] + ["m-new"]

    plan, looked = await sync_to_async(_explain_look)("t-long", carried)

    assert looked[4] == ["m-new"]  # the one id the thread does not hold
    assert looked[5] == [160, None]  # all current, none superseded
    assert looked[6:8] == (0, 159)  # nothing set aside; the last position
    assert _rows_handled(plan) < 12 * len(carried), _rows_handled(plan)


async def test_a_continued_threads_look_up_of_its_new_ids_reads_none_of_its_messages(
    pg: PgTurnStore,
) -> None:
    # A continued turn asks about its new messages alone (history_ids.py); joining them with the
    # thread's messages read the whole thread for one id, a cost growing with the thread.
    long_history = history(*[f"turn {n}" for n in range(160)])
    await pg.prepare(turn=record("t-long", long_history), reap=never_reap)
    await Run.objects.filter(thread__thread_id="t-long").aupdate(status=RunStatus.SUCCEEDED)
    # With the statistics autovacuum gathers as a table grows (without any, PostgreSQL may
    # take either index leading with the thread, and reads the thread as a join did).
    await sync_to_async(_analyze)("conversations_message")

    plan, looked = await sync_to_async(_explain_look)("t-long", ["m-new", "m3"])

    assert looked[4] == ["m-new"]  # the id the thread does not hold
    assert looked[5] == [1, None]  # m3: current, not superseded
    message_reads = _relation_reads(plan, "conversations_message")
    # The two probes, the count of messages set aside and the last position: not 160 rows.
    assert sum(_rows_handled(node) for node in message_reads) <= 8, message_reads


def _analyze(table: str) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {table}")


@pytest.mark.parametrize(("carried", "probed_text"), [(3, True), (40, False)])
async def test_probing_and_joining_the_carried_ids_find_the_same(
    pg: PgTurnStore, carried: int, probed_text: bool
) -> None:
    """Up to PROBED_IDS ids per look-up are probed, more are joined with the thread's
    messages (a history read whole); either text answers alike, superseded and missing ids
    included."""
    first = history(*[f"turn {n}" for n in range(30)])
    prepared = await pg.prepare(turn=record("t-both", first), reap=never_reap)
    await succeed(pg, prepared)
    await Message.objects.filter(thread__thread_id="t-both", message_id="m4").aupdate(
        superseded=True
    )
    ids = ["m4", *[f"m{n}" for n in range(5, 3 + carried)], "m-absent"]
    assert len(ids) == carried
    look_ups = [LookUp("t-both", None, "default", ids, None, timezone.now())]

    _plan, probed = await sync_to_async(_explain_look_ups)(look_ups, statement=LOOK_PROBED)
    _plan, joined = await sync_to_async(_explain_look_ups)(look_ups, statement=LOOK_JOINED)

    # The ids' order is not part of the answer (the join's is its hash's).
    def unordered(row: tuple[Any, ...]) -> tuple[Any, ...]:
        current_sent, restore = row[6]
        return (*row[:5], sorted(row[5] or ()), current_sent, sorted(restore or ()), *row[7:])

    stored = {f"m{n}" for n in range(30)}
    assert [unordered(row) for row in probed] == [unordered(row) for row in joined]
    assert sorted(probed[0][5]) == sorted(i for i in ids if i not in stored)  # missing
    assert probed[0][6] == [len(stored & set(ids)) - 1, ["m4"]]  # current ones, superseded
    assert look_ups_statement(look_ups)[0] == (LOOK_PROBED if probed_text else LOOK_JOINED)


async def test_a_grouped_look_up_probes_each_thread_once_however_many_a_site_holds(
    pg: PgTurnStore,
) -> None:
    # A first version found the threads a group did not hold yet with an anti join reading
    # every thread of the site: a cost growing with the site, not with the group.
    for thread_id in ("t-a", "t-b"):
        prepared = await pg.prepare(turn=record(thread_id, history("x", "y")), reap=never_reap)
        await succeed(pg, prepared)
    await sync_to_async(_other_threads)(threads=60, turns=2)
    now = timezone.now()
    look_ups = [
        LookUp("t-a", None, "default", ["m0", "m1", "m2"], None, now),
        LookUp("t-new", None, "default", ["m0"], None, now),
        LookUp("t-b", None, "default", ["m0", "m1", "m2"], None, now),
    ]

    plan, rows = await sync_to_async(_explain_look_ups)(look_ups)

    assert [(row[0], row[5]) for row in rows] == [(1, ["m2"]), (2, ["m0"]), (3, ["m2"])]
    thread_reads = _relation_reads(plan, "conversations_thread")
    assert thread_reads, "the plan reads no thread"
    # A probe per turn (the insert's own check of the new thread's key is not a read here).
    assert sum(_rows_handled(node) for node in thread_reads) <= len(look_ups), thread_reads
    message_reads = _relation_reads(plan, "conversations_message")
    assert sum(_rows_handled(node) for node in message_reads) <= 3 * 7, message_reads


def _relation_reads(plan: dict[str, Any], relation: str) -> list[dict[str, Any]]:
    found = [plan] if plan.get("Relation Name") == relation and "Scan" in plan["Node Type"] else []
    for child in plan.get("Plans", []):
        found += _relation_reads(child, relation)
    return found


async def _continued(pg: PgTurnStore, thread_id: str, turns: int) -> list[InputMessage]:
    """A thread continued ``turns`` times, each turn re-sending the whole history."""
    messages = history()
    for turn in range(turns):
        messages = [*messages, text(f"{thread_id}-u{turn}", "user", f"question {turn}")]
        prepared = await pg.prepare(turn=record(thread_id, [*messages]), reap=never_reap)
        reply = f"{thread_id}-a{turn}"
        await succeed(pg, prepared, reply=reply)
        messages.append(text(reply, "assistant", ""))
    return messages


async def test_a_look_up_reads_the_threads_messages_only_to_match_the_carried_ids(
    pg: PgTurnStore,
) -> None:
    # Beyond matching the ids the request carries, the look-up reads of the thread's
    # messages the last position and the few set aside, however long the thread. (The count
    # of its current messages once read all of them: +0.2 ms at the 120th turn.)
    messages = await _continued(pg, "t-long", 60)
    # The tables as a site holds them (other threads' rows, statistics up to date), or the
    # planner rightly reads a table of a few hundred rows whole.
    await sync_to_async(_other_threads)(threads=40, turns=40)
    carried = [m.id for m in messages if m.role != "system"] + ["m-new"]
    plan, looked = await sync_to_async(_explain_look)("t-long", carried)

    assert looked[4] == ["m-new"]
    assert looked[6:8] == (0, 119)  # nothing set aside; the last position
    reads = _message_reads(plan)
    # The match (the statement's own join, not a subquery of it): the thread's messages, once.
    match = [node for node in reads if node.get("Subplan Name") is None]
    assert match, "the plan matches no message"
    assert sum(_rows_handled(node) for node in match) <= 2 * len(carried), match
    outside_the_match = [
        (node.get("Index Name"), _rows_handled(node)) for node in reads if node not in match
    ]
    assert outside_the_match, "the plan reads no message outside the match"
    assert all(rows <= 1 for _index, rows in outside_the_match), outside_the_match


def _message_reads(plan: dict[str, Any], under: str | None = None) -> list[dict[str, Any]]:
    """The plan's nodes that read conversations_message, each named by the subplan (CTE,
    InitPlan, SubPlan) it belongs to."""
    under = plan.get("Subplan Name", under)
    found = []
    if plan.get("Relation Name") == "conversations_message":
        found.append({**plan, "Subplan Name": under})
    for child in plan.get("Plans", []):
        found += _message_reads(child, under)
    return found


def _other_threads(*, threads: int, turns: int, analyze: bool = True) -> None:
    from django.db import connection

    now = timezone.now()
    for n in range(threads):
        thread = Thread.objects.create(thread_id=f"t-other-{n}", created_at=now, updated_at=now)
        Run.objects.bulk_create(
            Run(id=f"r-other-{n}-{t}", thread=thread, status=RunStatus.SUCCEEDED, created_at=now)
            for t in range(turns)
        )
        Message.objects.bulk_create(
            Message(
                thread=thread,
                position=p,
                message_id=f"m-other-{n}-{p}",
                kind="text",
                role="user",
                created_at=now,
            )
            for p in range(2 * turns)
        )
    if analyze:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # as autovacuum would


async def test_a_gap_in_the_positions_never_keeps_an_omitted_message_current(
    pg: PgTurnStore,
) -> None:
    # The look-up bounds the thread's current messages by its last position: a row deleted
    # by hand leaves a gap, and the bound is then above the count, never below it.
    messages = await _continued(pg, "t-gap", 3)  # u0 a0 u1 a1 u2 a2 at positions 0-5
    await Message.objects.filter(message_id="t-gap-a0").adelete()

    sent_all = [m for m in messages if m.id != "t-gap-a0"]
    await _turn(pg, "t-gap", [*sent_all, text("u-next", "user", "more")])
    assert await _superseded("t-gap") == []

    edited = [m for m in sent_all if m.id not in ("t-gap-a1", "t-gap-u2", "t-gap-a2")]
    await _turn(pg, "t-gap", [*edited, text("u-edit", "user", "instead")])
    assert await _superseded("t-gap") == ["t-gap-a1", "t-gap-u2", "t-gap-a2", "u-next"]


async def test_messages_set_aside_are_not_counted_as_current(pg: PgTurnStore) -> None:
    # Superseded messages and agent states are the look-up's "set aside" count.
    messages = await _continued(pg, "t-aside", 2)  # u0 a0 u1 a1
    state = InputMessage(id="state-1", kind="agent_state", agent_state={"n": 1})
    await _turn(pg, "t-aside", [*messages[:-2], state, text("u-edit", "user", "instead")])
    assert await _superseded("t-aside") == ["t-aside-u1", "t-aside-a1"]

    # Re-sent whole again, with the state: nothing more is superseded, the two stay so.
    stored = [*messages[:-2], state, text("u-edit", "user", "instead")]
    await _turn(pg, "t-aside", [*stored, text("u-more", "user", "and more")])
    assert await _superseded("t-aside") == ["t-aside-u1", "t-aside-a1"]

    # One current message omitted: it is superseded, with nothing else.
    await _turn(pg, "t-aside", [*messages[:2], state, text("u-last", "user", "last")])
    assert await _superseded("t-aside") == [
        "t-aside-a0",
        "t-aside-u1",
        "t-aside-a1",
        "u-edit",
        "u-more",
    ]


async def _turn(pg: PgTurnStore, thread_id: str, messages: list[InputMessage]) -> None:
    await succeed(pg, await pg.prepare(turn=record(thread_id, messages), reap=never_reap))


async def _superseded(thread_id: str) -> list[str]:
    rows = Message.objects.filter(thread__thread_id=thread_id, superseded=True)
    return [m.message_id async for m in rows.order_by("position")]


async def test_ending_runs_reads_only_their_rows_of_the_runs_and_threads(
    pg: PgTurnStore,
) -> None:
    # Ends handed over together find their runs and threads by key. (With the run ids only in
    # the JSON rows, the planner joined the whole runs table to a dozen ends: 0.6 ms at 3,500
    # runs, growing with the table.)
    ended = [
        await pg.prepare(turn=record(f"t-end-{n}", history("q")), reap=never_reap) for n in range(3)
    ]
    # The tables as a site holds them: other threads' rows, statistics up to date.
    await sync_to_async(_other_threads)(threads=400, turns=4)
    entries = [RunProgress(turn.run_id, turn.thread_pk, finished()) for turn in ended]

    plan = await sync_to_async(_explain_generic_progress)(entries)

    reads = [
        (node["Relation Name"], node["Node Type"], _rows_handled(node))
        for node in _nodes(plan)
        if node.get("Relation Name") in ("conversations_run", "conversations_thread")
        and node["Node Type"] != "ModifyTable"
    ]
    assert {relation for relation, _type, _rows in reads} == {
        "conversations_run",
        "conversations_thread",
    }
    assert all(rows <= 2 * len(entries) for _r, _type, rows in reads), reads
    assert [(await Run.objects.aget(pk=turn.run_id)).is_finished for turn in ended] == [True] * 3


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(node for child in plan.get("Plans", []) for node in _nodes(child))]


def _explain_generic_progress(entries: list[RunProgress]) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the statement writing ``entries``, planned as the prepared
    statement runs once PostgreSQL settles on a generic plan."""
    from django.db import connection

    statement = progress_statement(entries, now=timezone.now())
    assert statement is not None
    sql, params = statement
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            # A server-side prepared statement (psycopg's binding): generic plans apply.
            cursor.execute(
                "PREPARE progress AS " + sql.replace("%s", "${}").format(*range(1, len(params) + 1))
            )
            literals = ", ".join(["%s"] * len(params))
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE progress({literals})", params)
            return cursor.fetchone()[0][0]["Plan"]
        finally:
            cursor.execute("DEALLOCATE ALL")
            cursor.execute("RESET plan_cache_mode")


async def test_a_run_end_planned_on_nearly_empty_tables_still_reads_only_its_rows_later(
    pg: PgTurnStore,
) -> None:
    # A new site: the end statement's generic plan is made while the tables hold a few rows,
    # then they grow, and no ANALYZE comes in between to replan it (autovacuum's first comes
    # a minute or more later). A plan scanning the runs table then reads every run.
    ended = [
        await pg.prepare(turn=record(f"t-young-{n}", history("q")), reap=never_reap)
        for n in range(3)
    ]
    entries = [RunProgress(turn.run_id, turn.thread_pk, finished()) for turn in ended]
    statement = progress_statement(entries, now=timezone.now())
    assert statement is not None

    plan = await _explain_generic_plan_made_before_growth(*statement)

    assert _reads_by_key(plan, "conversations_run", "conversations_thread") <= 2 * len(entries)
    assert [(await Run.objects.aget(pk=turn.run_id)).is_finished for turn in ended] == [True] * 3


async def test_a_turn_write_planned_on_nearly_empty_tables_still_reads_only_its_rows_later(
    pg: PgTurnStore,
) -> None:
    now = timezone.now()
    threads = [
        await Thread.objects.acreate(thread_id=f"t-young-write-{n}", created_at=now, updated_at=now)
        for n in range(3)
    ]
    writes = [
        turn_write.TurnWrite(
            run=[
                *(f"r-young-{t.pk}", t.pk, "default", "agui", "Chat", ""),
                *("running", now, now, now, None, 1),
            ],
            messages=[],
            thread=[t.pk, "running", now, ""],
        )
        for t in threads
    ]

    plan = await _explain_generic_plan_made_before_growth(*turn_write.turn_writes_statement(writes))

    assert _reads_by_key(plan, "conversations_thread") <= 2 * len(writes)
    assert [(await Thread.objects.aget(pk=t.pk)).status for t in threads] == ["running"] * 3


def _reads_by_key(plan: dict[str, Any], *relations: str) -> int:
    """The most rows any node reading ``relations`` handled (0 when none reads them)."""
    reads = [
        _rows_handled(node)
        for node in _nodes(plan)
        if node.get("Relation Name") in relations and node["Node Type"] != "ModifyTable"
    ]
    assert reads, "the plan reads none of " + ", ".join(relations)
    return max(reads)


async def _explain_generic_plan_made_before_growth(sql: str, params: list[Any]) -> dict[str, Any]:
    """EXPLAIN ANALYZE of ``sql`` on a connection of the store's pool, run with the generic
    plan PostgreSQL made for it while the tables held a few rows, statistics included; then
    400 threads, 1,600 runs and 3,200 messages were added and nothing analyzed them (a new
    site before autovacuum's next pass)."""
    pool = await POOLS.get()
    async with pool.connection() as conn:
        cursor = psycopg.AsyncClientCursor(conn)
        # The statistics of the nearly empty tables, whatever the tests before left.
        await cursor.execute(
            "ANALYZE conversations_thread, conversations_run, conversations_message"
        )
        await cursor.execute("SET plan_cache_mode = force_generic_plan")
        try:
            numbered = sql.replace("%s", "${}").format(*range(1, len(params) + 1))
            await cursor.execute("PREPARE planned_young AS " + numbered)
            literals = ", ".join(["%s"] * len(params))
            # Plans it (cached from now on) without running it.
            await cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE planned_young({literals})", params)
            await sync_to_async(_other_threads)(threads=400, turns=4, analyze=False)
            await cursor.execute(
                f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE planned_young({literals})", params
            )
            row = await cursor.fetchone()
            assert row is not None
            return row[0][0]["Plan"]
        finally:
            await cursor.execute("DEALLOCATE ALL")
            await cursor.execute("RESET plan_cache_mode")


async def test_turns_prepared_at_once_are_written_in_one_statement_like_the_orm_writes_them(
    pg: PgTurnStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements: list[list[str]] = []
    write_turns = turn_write.write_turns

    async def counting(writes: Any) -> None:
        statements.append([write.run[0] for write in writes])
        if len(statements) == 1:
            # A database slow to answer: the turns whose look-up ends meanwhile wait for it.
            await asyncio.sleep(0.3)
        await write_turns(writes)

    # Read when this test's loop makes its group (the first write on it).
    monkeypatch.setattr(turn_write, "write_turns", counting)
    turns = [record(f"t-at-once-{n}", history("a", "b", "c")) for n in range(3)]

    prepared = await asyncio.gather(*(pg.prepare(turn=t, reap=never_reap) for t in turns))

    # Each look-up is a round trip of its own; the writes of those that ended while a write
    # was in flight went together in the next statement.
    assert sorted(run for group in statements for run in group) == sorted(t.run_id for t in turns)
    assert len(statements) <= 2, statements
    orm = OrmTurnStore()
    for n in range(3):
        await orm.prepare(
            turn=record(f"t-at-once-orm-{n}", history("a", "b", "c")), reap=never_reap
        )
        sql = await sync_to_async(messages_of)(f"t-at-once-{n}")
        assert sql == await sync_to_async(messages_of)(f"t-at-once-orm-{n}")
        assert await sync_to_async(run_of)(prepared[n].run_id) == await sync_to_async(run_of)(
            (await Run.objects.aget(thread__thread_id=f"t-at-once-orm-{n}")).pk
        )
        thread = await Thread.objects.aget(thread_id=f"t-at-once-{n}")
        assert (thread.status, thread.title) == ("running", "a")
