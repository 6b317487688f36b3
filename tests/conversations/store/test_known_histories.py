"""A continued thread's look-up asks only about the ids this process does not know the thread
holds (``conversations/store/known.py``), and stores exactly what the ORM store stores, also
when the thread's messages changed behind the process's back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone

from conversations.models import Message, Thread
from conversations.store.known import KNOWN, KnownHistories, KnownHistory
from conversations.store.orm import OrmTurnStore
from conversations.store.pg import prepare as pg_prepare
from conversations.store.pg.look_up import LookUp
from conversations.store.pg.store import PgTurnStore
from copilot_runtime.events.recent import RecentStore
from copilot_runtime.events.request import InputMessage
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
    assert KNOWN.get((None, "t-state")) is not None


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


# Threads as the store keys them: (owner, client thread id); anonymous here.
A, B, C, D, E = ((None, name) for name in "abcde")


def test_the_ids_known_are_bounded_least_recently_used_out_first() -> None:
    known = KnownHistories(RecentStore(size=5))

    def entry(*ids: str) -> KnownHistory:
        return KnownHistory(thread_pk=1, version=1, ids=frozenset(ids))

    known.remember(A, entry("a1", "a2"))
    known.remember(B, entry("b1", "b2"))
    assert known.get(A) is not None  # a is now the most recent
    known.remember(C, entry("c1", "c2"))  # 6 ids: b goes
    assert (known.get(B), len(known)) == (None, 2)
    known.remember(D, entry(*(f"d{n}" for n in range(6))))  # larger than the bound: never
    assert known.get(D) is None and known.get(A) is not None
    known.forget(A)
    known.remember(E, entry("e1", "e2", "e3"))
    assert known.get(C) is not None and known.get(E) is not None


def test_cleared_nothing_is_known_and_the_whole_bound_is_free_again() -> None:
    known = KnownHistories(RecentStore(size=4))
    known.remember(A, KnownHistory(thread_pk=1, version=1, ids=frozenset({"a1", "a2"})))
    known.remember(B, KnownHistory(thread_pk=2, version=1, ids=frozenset({"b1", "b2"})))
    known.clear()
    assert (known.get(A), known.get(B), len(known)) == (None, None, 0)
    known.remember(C, KnownHistory(thread_pk=3, version=1, ids=frozenset({"c1", "c2", "c3"})))
    known.remember(D, KnownHistory(thread_pk=4, version=1, ids=frozenset({"d1"})))
    assert known.get(C) is not None and known.get(D) is not None  # 4 ids: both fit


async def test_a_turn_whose_write_fails_leaves_what_was_known(
    pg: PgTurnStore, blind_to_active_runs: Callable[[], None]
) -> None:
    seen: list[KnownHistory | None] = []
    get = KNOWN.get

    def recording(thread: tuple[int | None, str]) -> KnownHistory | None:
        seen.append(get(thread))  # what the racing turn found known
        return seen[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(KNOWN, "get", recording)
        await write_raced(pg, "t-failed", blind_to_active_runs)
    before = seen[-1]
    assert before is not None and before.ids == frozenset({"m0"})
    # The new messages were never stored: they are not known.
    known = KNOWN.get((None, "t-failed"))
    assert known is not None and known.ids == frozenset({"m0"})
