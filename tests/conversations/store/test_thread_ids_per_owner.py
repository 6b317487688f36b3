"""Client thread ids are scoped to their owner, in the raw-SQL store and the ORM store alike.

Another caller's id starts that caller's own thread (its own messages, state and runs); the
anonymous callers share one namespace; a busy thread refuses its own owner's next turn only.
Each scenario runs through both stores (``pg`` and ``orm``) and the rows they leave agree.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError, transaction

from conversations.models import Message, Thread
from conversations.services.runs import ThreadBusy
from conversations.store.orm import OrmTurnStore
from conversations.store.pg import look_up as pg_look_up
from conversations.store.pg import prepare as pg_prepare
from conversations.store.pg.look_up import LookUp
from conversations.store.pg.store import PgTurnStore
from conversations.store.types import PreparedTurn
from copilot_runtime.history import HISTORIES, StoredIds
from tests.conversations.store.test_pg_store import MESSAGE_FIELDS, history, never_reap, record
from tests.conversations.store.test_pg_store import succeed as run_succeeds

pytestmark = pytest.mark.django_db(transaction=True)

Store = PgTurnStore | OrmTurnStore


@pytest.fixture(params=["pg", "orm"])
def store(request: pytest.FixtureRequest, pg: PgTurnStore) -> Store:
    return pg if request.param == "pg" else OrmTurnStore()


@pytest.fixture
async def owners(django_user_model: Any) -> tuple[Any, Any]:
    alice = await django_user_model.objects.acreate(username="alice")
    bob = await django_user_model.objects.acreate(username="bob")
    return alice, bob


def rows_of(thread_pk: int) -> list[tuple[Any, ...]]:
    return [
        tuple(getattr(m, f) for f in MESSAGE_FIELDS)
        for m in Message.objects.filter(thread_id=thread_pk).order_by("position")
    ]


async def prepare(store: Store, thread_id: str, *pairs: str, user: Any = None) -> PreparedTurn:
    prepared = await store.prepare(
        turn=record(thread_id, history(*pairs), user=user or AnonymousUser()), reap=never_reap
    )
    if prepared.stored is not None:
        await prepared.stored
    return prepared


async def test_two_owners_and_the_anonymous_callers_each_get_their_own_thread(
    store: Store, owners: tuple[Any, Any]
) -> None:
    alice, bob = owners
    theirs = {
        "alice": await prepare(store, "t-shared", "alice's secret", user=alice),
        "bob": await prepare(store, "t-shared", "bob's question", user=bob),
        "anonymous": await prepare(store, "t-shared", "anonymous hello"),
    }
    for prepared in theirs.values():
        await run_succeeds(store, prepared)
    # Each continues its own thread: the history it sends is its own, never the others'.
    again = await prepare(store, "t-shared", "alice's secret", "ok", "more", user=alice)

    assert len({prepared.thread_pk for prepared in theirs.values()}) == 3
    assert again.thread_pk == theirs["alice"].thread_pk
    assert again.new_message_ids == ("m1", "m2")
    stored = {
        (t.owner_id, t.thread_id): t.pk async for t in Thread.objects.filter(thread_id="t-shared")
    }
    assert stored == {
        (alice.pk, "t-shared"): theirs["alice"].thread_pk,
        (bob.pk, "t-shared"): theirs["bob"].thread_pk,
        (None, "t-shared"): theirs["anonymous"].thread_pk,
    }
    contents = {
        name: [row[4] for row in await sync_to_async(rows_of)(prepared.thread_pk)]
        for name, prepared in theirs.items()
    }
    assert contents == {
        "alice": ["alice's secret", "ok", "more"],
        "bob": ["bob's question"],
        "anonymous": ["anonymous hello"],
    }


async def test_the_raw_sql_store_and_the_orm_store_write_the_same_rows_per_owner(
    pg: PgTurnStore, owners: tuple[Any, Any]
) -> None:
    alice, bob = owners
    written: dict[str, list[list[tuple[Any, ...]]]] = {}
    for name, store, thread_id in (("sql", pg, "t-sql"), ("orm", OrmTurnStore(), "t-orm")):
        threads = []
        for user, pairs in ((alice, ("a", "b", "c")), (bob, ("x",)), (None, ("y", "z", "w"))):
            prepared = await prepare(store, thread_id, *pairs, user=user)
            await run_succeeds(store, prepared, reply="reply")
            threads.append(prepared.thread_pk)
        written[name] = [await sync_to_async(rows_of)(pk) for pk in threads]

    assert written["sql"] == written["orm"]
    assert [len(rows) for rows in written["sql"]] == [4, 2, 4]


async def test_anonymous_callers_share_one_namespace(store: Store) -> None:
    first = await prepare(store, "t-anonymous", "hello")
    await run_succeeds(store, first)
    continued = await prepare(store, "t-anonymous", "hello", "hi", "again")

    assert continued.thread_pk == first.thread_pk
    assert continued.new_message_ids == ("m1", "m2")
    assert await Thread.objects.filter(thread_id="t-anonymous").acount() == 1


async def test_a_busy_thread_refuses_its_own_owner_only(
    store: Store, owners: tuple[Any, Any]
) -> None:
    alice, bob = owners
    await prepare(store, "t-busy", "working", user=alice)  # its run stays pending

    with pytest.raises(ThreadBusy):
        await prepare(store, "t-busy", "working", "more", user=alice)
    bobs = await prepare(store, "t-busy", "mine", user=bob)
    anonymous = await prepare(store, "t-busy", "mine too")
    with pytest.raises(ThreadBusy):
        await prepare(store, "t-busy", "mine", "again", user=bob)

    assert len({bobs.thread_pk, anonymous.thread_pk}) == 2


async def test_owners_creating_one_id_at_once_in_one_look_up_get_a_thread_each(
    pg: PgTurnStore, owners: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grouped look-up creates each owner's thread (its insert and its read-back match by
    owner as well as id), and of one caller's racing turns one runs."""
    alice, bob = owners
    sizes: list[int] = []
    look_many = pg_look_up.look_many

    async def counted(asked: Any) -> None:
        sizes.append(len(asked))
        await look_many(asked)

    monkeypatch.setattr(pg_look_up, "look_many", counted)
    await prepare(pg, "t-warm", "x")  # the loop's group, and its first statement, are made
    sizes.clear()

    outcomes = await asyncio.gather(
        prepare(pg, "t-new", "first", user=alice),
        prepare(pg, "t-new", "a", user=alice),
        prepare(pg, "t-new", "b", user=bob),
        prepare(pg, "t-new", "c"),
        prepare(pg, "t-new", "d", user=bob),
        return_exceptions=True,
    )

    assert sizes[0] == 1 and sizes[1] == 4  # the four that came meanwhile share a statement
    started = [o for o in outcomes if isinstance(o, PreparedTurn)]
    refused = [o for o in outcomes if not isinstance(o, PreparedTurn)]
    assert len(started) == 3 and all(isinstance(o, ThreadBusy) for o in refused), outcomes
    owners_of = {t.pk: t.owner_id async for t in Thread.objects.filter(thread_id="t-new")}
    assert sorted(owners_of.values(), key=str) == sorted([alice.pk, bob.pk, None], key=str)
    assert {o.thread_pk for o in started} == set(owners_of)


def _stored(thread: tuple[int | None, str]) -> StoredIds | None:
    """What the process knows the thread stores (its known history's, copilot_runtime/history)."""
    known = HISTORIES.of_thread(thread)
    return known.stored if known is not None else None


async def test_what_a_process_knows_of_a_thread_is_kept_per_owner(
    pg: PgTurnStore, owners: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alice's continued thread asks only about its new ids; Bob's first turn on the same id
    is asked about whole, and leaves what is known of Alice's thread as it was."""
    alice, bob = owners
    asked: list[list[str]] = []
    look = pg_prepare.look

    async def recording(look_up: LookUp) -> tuple[Any, ...]:
        asked.append(list(look_up.ids))
        return await look(look_up)

    monkeypatch.setattr(pg_prepare, "look", recording)
    first = await prepare(pg, "t-known", "one", user=alice)
    await run_succeeds(pg, first)
    known = _stored((alice.pk, "t-known"))
    asked.clear()

    bobs = await prepare(pg, "t-known", "one", "two", "three", user=bob)
    await run_succeeds(pg, bobs)
    alices = await prepare(pg, "t-known", "one", "two", "three", user=alice)

    assert known is not None and known.thread_pk == first.thread_pk
    assert asked == [["m0", "m1", "m2"], ["m1", "m2"]]
    assert _stored((alice.pk, "t-known")) is not None
    bobs_known = _stored((bob.pk, "t-known"))
    assert bobs_known is not None and bobs_known.thread_pk == bobs.thread_pk
    assert alices.thread_pk == first.thread_pk and alices.new_message_ids == ("m1", "m2")


def test_the_database_keeps_ids_unique_per_owner_and_among_anonymous_threads(
    django_user_model: Any,
) -> None:
    alice = django_user_model.objects.create(username="alice")
    bob = django_user_model.objects.create(username="bob")
    for owner in (alice, bob, None):
        Thread.objects.create(thread_id="t-unique", owner=owner)

    for owner in (alice, None):
        with pytest.raises(IntegrityError), transaction.atomic():
            Thread.objects.create(thread_id="t-unique", owner=owner)
    assert Thread.objects.filter(thread_id="t-unique").count() == 3
