"""Migrations that change data, run forward on a database holding that data."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

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
