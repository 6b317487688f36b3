"""A continued thread's look-up asks only about the ids the request's known history says the
thread holds (``conversations/store/pg/history_ids.py``, copilot_runtime/history), and stores
exactly what the ORM store stores, also when the thread's messages changed behind the
process's back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone

from conversations.models import Message, Thread
from conversations.store.orm import OrmTurnStore
from conversations.store.pg import prepare as pg_prepare
from conversations.store.pg.look_up import LookUp
from conversations.store.pg.store import PgTurnStore
from copilot_runtime.events.request import InputMessage
from copilot_runtime.history import HISTORIES, StoredIds
from tests.conversations.store.test_pg_store import (
    history,
    messages_of,
    never_reap,
    record,
    succeed,
    write_raced,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The ids each look-up asked about, in order."""
    seen: list[list[str]] = []
    look = pg_prepare.look

    async def recording(look_up: LookUp) -> tuple[Any, ...]:
        seen.append(list(look_up.ids))
        return await look(look_up)

    monkeypatch.setattr(pg_prepare, "look", recording)
    return seen


async def _turns(
    store: PgTurnStore | OrmTurnStore, thread_id: str, turns: list[list[InputMessage]]
) -> None:
    for messages in turns:
        prepared = await store.prepare(turn=record(thread_id, [*messages]), reap=never_reap)
        if prepared.stored is not None:
            await prepared.stored
        await succeed(store, prepared)


def _version(thread_id: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT history_version FROM conversations_thread WHERE thread_id = %s", [thread_id]
        )
        return int(cursor.fetchone()[0])


async def test_a_continued_thread_asks_only_about_its_new_messages(
    pg: PgTurnStore,
    asked: list[list[str]],
) -> None:
    turns = [history("one"), history("one", "two", "three"), history("one", "two", "three", "4")]
    await _turns(pg, "t-known", turns)
    await _turns(OrmTurnStore(), "t-known-orm", turns)

    assert asked == [["m0"], ["m1", "m2"], ["m3"]]
    assert await sync_to_async(messages_of)("t-known") == await sync_to_async(messages_of)(
        "t-known-orm"
    )


async def test_messages_superseded_behind_its_back_are_asked_about_again_and_restored(
    pg: PgTurnStore,
    asked: list[list[str]],
) -> None:
    """Another process (here: the ORM, as the admin or another runtime would) supersedes a
    message the process knows as current: the version moved, so the look-up is asked again
    whole, and the message the client still sends is restored, as the ORM store does."""
    results = []
    for store, thread_id in ((pg, "t-behind"), (OrmTurnStore(), "t-behind-orm")):
        await _turns(store, thread_id, [history("one", "two")])
        before = await sync_to_async(_version)(thread_id)
        await Message.objects.filter(thread__thread_id=thread_id, message_id="m0").aupdate(
            superseded=True
        )
        assert await sync_to_async(_version)(thread_id) != before
        await _turns(store, thread_id, [history("one", "two", "three")])
        results.append(await sync_to_async(messages_of)(thread_id))
    assert results[0] == results[1]
    assert not any(row[-1] for row in results[0])  # m0 is current again
    assert asked[-2:] == [["m2"], ["m0", "m1", "m2"]]  # trimmed, refused, asked whole


async def test_a_message_deleted_by_hand_is_stored_again_as_the_orm_store_does(
    pg: PgTurnStore,
    asked: list[list[str]],
) -> None:
    results = []
    for store, thread_id in ((pg, "t-deleted"), (OrmTurnStore(), "t-deleted-orm")):
        await _turns(store, thread_id, [history("one", "two", "three")])
        await Message.objects.filter(thread__thread_id=thread_id, message_id="m1").adelete()
        await _turns(store, thread_id, [history("one", "two", "three", "four")])
        results.append(await sync_to_async(messages_of)(thread_id))
    assert results[0] == results[1]
    assert [row[1] for row in results[0]] == ["m0", "m2", "m1", "m3"]


async def test_a_thread_made_again_under_the_same_id_is_not_taken_for_the_old_one(
    pg: PgTurnStore,
    asked: list[list[str]],
) -> None:
    await _turns(pg, "t-again", [history("one", "two")])
    await Thread.objects.filter(thread_id="t-again").adelete()
    await _turns(pg, "t-again", [history("one", "two", "three")])

    assert [row[1] for row in await sync_to_async(messages_of)("t-again")] == ["m0", "m1", "m2"]
    assert asked[-1] == ["m0", "m1", "m2"]


async def test_agent_states_in_the_history_are_never_known_as_current(
    pg: PgTurnStore,
    asked: list[list[str]],
) -> None:
    """An agent state message is stored but never counted among the current messages: a
    history carrying one continues without superseding anything, and it is asked about."""

    def with_state(*pairs: str) -> list[InputMessage]:
        messages = history(*pairs)
        messages.insert(2, InputMessage(id="state-1", kind="agent_state", agent_state={"a": 1}))
        return messages

    turns = [with_state("one", "two"), with_state("one", "two", "three")]
    await _turns(pg, "t-state", turns)
    await _turns(OrmTurnStore(), "t-state-orm", turns)

    sql = await sync_to_async(messages_of)("t-state")
    assert sql == await sync_to_async(messages_of)("t-state-orm")
    assert not any(row[-1] for row in sql)
    assert asked[-1] == ["state-1", "m2"]
    known = HISTORIES.of_thread((None, "t-state"))
    assert known is not None and known.stored is not None
    assert "state-1" not in known.stored.ids


def test_the_version_moves_on_updates_and_deletes_of_messages_only(
    transactional_db: Any,
) -> None:
    thread = Thread.objects.create(thread_id="t-version", agent_name="default")
    created = _version("t-version")
    for position in (0, 1):
        Message.objects.create(
            thread=thread,
            position=position,
            message_id=f"v{position}",
            kind="text",
            role="user",
            created_at=timezone.now(),
        )
    assert _version("t-version") == created  # adding messages leaves it
    Thread.objects.filter(pk=thread.pk).update(title="renamed")
    assert _version("t-version") == created
    Message.objects.filter(message_id="v0").update(superseded=True)
    updated = _version("t-version")
    assert updated != created
    Message.objects.filter(message_id="v1").delete()
    assert _version("t-version") not in (created, updated)


async def test_a_turn_whose_write_fails_leaves_what_was_known(
    pg: PgTurnStore, blind_to_active_runs: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[StoredIds | None] = []
    known_ids = pg_prepare.known_ids

    def recording(history: Any, thread: Any) -> StoredIds | None:
        seen.append(known_ids(history, thread))  # what the racing turn found known
        return seen[-1]

    monkeypatch.setattr(pg_prepare, "known_ids", recording)
    await write_raced(pg, "t-failed", blind_to_active_runs)

    before = seen[-1]
    assert before is not None and before.ids == frozenset({"m0"})
    # The new messages were never stored: they are not known.
    known = HISTORIES.of_thread((None, "t-failed"))
    assert known is not None and known.stored is not None
    assert known.stored.ids == frozenset({"m0"})


async def test_what_the_store_learns_stays_with_the_requests_history(
    pg: PgTurnStore, asked: list[list[str]]
) -> None:
    """The ids known are those of the request's own history: a turn without one (a caller
    that enters none) asks about every id, and leaves what the thread's history knows."""
    await _turns(pg, "t-own", [history("one")])
    known = HISTORIES.of_thread((None, "t-own"))
    assert known is not None and known.stored is not None

    prepared = await pg.prepare(
        turn=record("t-own", history("one", "two"), history=None), reap=never_reap
    )
    await succeed(pg, prepared)

    assert asked[-1] == ["m0", "m1"]
    assert HISTORIES.of_thread((None, "t-own")) is known
    assert known.stored is not None and known.stored.ids == frozenset({"m0"})
