"""Migrations that change data, run forward on a database holding that data."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from conversations.models import Thread as ThreadModel
from tests.conversations.test_indexes import _pattern_indexes

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = ("conversations", "0006_fk_indexes_covered")
RESTORED = ("conversations", "0007_restore_run_one_active_per_thread")


def _migrate(target: tuple[str, str]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])
    return executor


@pytest.fixture
def at_0006() -> Iterator[MigrationExecutor]:
    executor = _migrate(BEFORE)
    with connection.cursor() as cursor:
        # As 0006 left PostgreSQL databases (SQLite kept the index).
        cursor.execute('DROP INDEX IF EXISTS "run_one_active_per_thread"')
    yield executor
    _migrate(executor.loader.graph.leaf_nodes("conversations")[0])


def test_0007_keeps_each_threads_newest_active_run_and_restores_the_guard(
    at_0006: MigrationExecutor,
) -> None:
    apps = at_0006.loader.project_state([BEFORE]).apps
    Thread = apps.get_model("conversations", "Thread")
    Run = apps.get_model("conversations", "Run")
    crowded = Thread.objects.create(thread_id="t-crowded")
    calm = Thread.objects.create(thread_id="t-calm")
    older = Run.objects.create(id="older", thread=crowded, status="running")
    newer = Run.objects.create(id="newer", thread=crowded, status="pending")
    Run.objects.create(id="alone", thread=calm, status="running")
    Run.objects.filter(pk=older.pk).update(created_at=newer.created_at.replace(year=2020))

    _migrate(RESTORED)

    statuses = dict(Run.objects.values_list("pk", "status"))
    assert statuses == {"older": "failed", "newer": "pending", "alone": "running"}
    assert Run.objects.get(pk="older").error_code == "SUPERSEDED_ACTIVE_RUN"
    with connection.cursor() as cursor:
        present = connection.introspection.get_constraints(cursor, "conversations_run")
    assert "run_one_active_per_thread" in present


def test_0011_drops_the_pattern_indexes_and_its_reversal_builds_them_again() -> None:
    from tests.conversations.test_indexes import TEXT_KEYS, _pattern_indexes

    executor = _migrate(("conversations", "0010_run_log_without_fk_constraints"))
    try:
        restored = {column: _pattern_indexes(model, column) for model, column in TEXT_KEYS}
        _migrate(("conversations", "0011_drop_pattern_indexes"))
        dropped = {column: _pattern_indexes(model, column) for model, column in TEXT_KEYS}
    finally:
        _migrate(executor.loader.graph.leaf_nodes("conversations")[0])

    assert all(len(names) == 1 for names in restored.values()), restored
    assert dropped == {"id": set(), "thread_id": set(), "run_id": set()}


def test_0012_keeps_the_threads_and_scopes_their_ids_to_their_owners(
    django_user_model: type,
) -> None:
    """Applied to a database holding threads (an owner's, an anonymous one, with their
    messages), 0012 keeps every row, and then lets another owner use a taken id, but neither
    an owner nor the anonymous callers twice."""
    before = ("conversations", "0011_drop_pattern_indexes")
    executor = _migrate(before)
    try:
        apps = executor.loader.project_state([before]).apps
        Thread = apps.get_model("conversations", "Thread")
        Message = apps.get_model("conversations", "Message")
        alice = django_user_model.objects.create(username="alice")
        bob = django_user_model.objects.create(username="bob")
        owned = Thread.objects.create(thread_id="t-owned", owner_id=alice.pk, title="Alice's")
        anonymous = Thread.objects.create(thread_id="t-anonymous")
        for thread in (owned, anonymous):
            Message.objects.create(
                thread=thread,
                position=0,
                message_id="m0",
                kind="text",
                role="user",
                content=f"kept in {thread.thread_id}",
                created_at=timezone.now(),
            )
        rows_before = sorted(Thread.objects.values_list("pk", "thread_id", "owner_id", "title"))

        executor = _migrate(("conversations", "0012_thread_id_per_owner"))
        apps = executor.loader.project_state([("conversations", "0012_thread_id_per_owner")]).apps
        Thread = apps.get_model("conversations", "Thread")
        Message = apps.get_model("conversations", "Message")

        assert sorted(Thread.objects.values_list("pk", "thread_id", "owner_id", "title")) == (
            rows_before
        )
        assert sorted(Message.objects.values_list("thread__thread_id", "content")) == [
            ("t-anonymous", "kept in t-anonymous"),
            ("t-owned", "kept in t-owned"),
        ]
        Thread.objects.create(thread_id="t-owned", owner_id=bob.pk)
        Thread.objects.create(thread_id="t-anonymous", owner_id=alice.pk)
        Thread.objects.create(thread_id="t-owned")  # the anonymous namespace has none yet
        for owner_id in (alice.pk, None):
            with pytest.raises(IntegrityError), transaction.atomic():
                Thread.objects.create(thread_id="t-owned", owner_id=owner_id)
        with connection.cursor() as cursor:
            present = connection.introspection.get_constraints(cursor, "conversations_thread")
        assert {"thread_unique_per_owner", "thread_unique_anonymous"} <= set(present)
        # The new key's index leads with the id; the id's own key and pattern index are gone.
        assert present["thread_unique_per_owner"]["columns"] == ["thread_id", "owner_id"]
        assert [
            name
            for name, found in present.items()
            if found["unique"] and found["columns"] == ["thread_id"]
        ] == ["thread_unique_anonymous"]
        assert _pattern_indexes(ThreadModel, "thread_id") == set()
    finally:
        Thread.objects.all().delete()
        _migrate(executor.loader.graph.leaf_nodes("conversations")[0])


def test_0012_reversed_gives_the_id_its_own_key_back_without_a_pattern_index() -> None:
    after = ("conversations", "0012_thread_id_per_owner")
    executor = _migrate(("conversations", "0011_drop_pattern_indexes"))
    try:
        apps = executor.loader.project_state([("conversations", "0011_drop_pattern_indexes")]).apps
        Thread = apps.get_model("conversations", "Thread")
        Thread.objects.create(thread_id="t-once")
        with pytest.raises(IntegrityError), transaction.atomic():
            Thread.objects.create(thread_id="t-once", owner_id=None)
        assert _pattern_indexes(ThreadModel, "thread_id") == set()
    finally:
        Thread.objects.all().delete()
        _migrate(after)
        _migrate(executor.loader.graph.leaf_nodes("conversations")[0])
