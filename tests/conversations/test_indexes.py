"""The conversation tables carry no index that another one already covers: every row a turn
writes updates each index of its table, and the event log and the spans grow fastest."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from conversations.models import AgentState, Message, Run, RunEvent, Span, Thread

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", [Thread, Message, AgentState, Run, RunEvent, Span])
def test_no_index_is_a_leading_part_of_another(model: type) -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    # A partial index holds a few of the table's rows: a longer index over all of them does
    # not do its work (message_set_aside is counted without reading the thread's messages).
    partial = {index.name for index in model._meta.indexes if index.condition is not None}
    plain = {
        name: tuple(found["columns"])
        for name, found in constraints.items()
        if found["index"]
        and not found["unique"]
        and not found["primary_key"]
        and name not in partial
    }
    every = {
        name: tuple(found["columns"])
        for name, found in constraints.items()
        if (found["index"] or found["unique"]) and found["columns"] and not found["primary_key"]
    }

    covered = [
        (name, other)
        for name, columns in plain.items()
        for other, longer in every.items()
        if other != name and len(longer) > len(columns) and longer[: len(columns)] == columns
    ]

    assert covered == []


@pytest.mark.parametrize(
    ("model", "column"),
    [
        (Thread, "owner_id"),
        (Message, "thread_id"),
        (Message, "run_id"),
        (AgentState, "thread_id"),
        (Run, "thread_id"),
        (RunEvent, "run_id"),
        (Span, "run_id"),
    ],
)
def test_every_foreign_key_still_leads_an_index(model: type, column: str) -> None:
    """Cascading deletes and the selectors look rows up by their parent: each foreign key is
    the first column of some index, its own or a composite one."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    leading = {found["columns"][0] for found in constraints.values() if found["columns"]}

    assert column in leading


@pytest.mark.parametrize("model", [Thread, Message, AgentState, Run, RunEvent, Span])
def test_every_declared_constraint_and_index_exists_in_the_migrated_database(
    model: type,
) -> None:
    """The migrations build what the models declare. (Altering a foreign key's index once
    dropped the partial unique index ``run_one_active_per_thread`` on PostgreSQL while the
    migration state kept it: see migration 0007.)"""
    with connection.cursor() as cursor:
        present = set(connection.introspection.get_constraints(cursor, model._meta.db_table))
    declared = {item.name for item in (*model._meta.constraints, *model._meta.indexes)}

    assert declared - present == set()


@pytest.mark.django_db(transaction=True)
def test_the_database_refuses_a_second_active_run_on_a_thread() -> None:
    thread = Thread.objects.create(thread_id="t-one-active")
    Run.objects.create(id="run-a", thread=thread, status="running")
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(id="run-b", thread=thread, status="pending")
    Run.objects.filter(pk="run-a").update(status="succeeded")
    Run.objects.create(id="run-c", thread=thread, status="pending")

    assert set(Run.objects.filter(thread=thread).values_list("pk", flat=True)) == {
        "run-a",
        "run-c",
    }


# The keys Django gives a second, pattern index (``varchar_pattern_ops``) on PostgreSQL, the
# database the suite runs on (scripts/test.sh); these tests read PostgreSQL's catalogue.
TEXT_KEYS = [(Run, "id"), (Thread, "thread_id"), (Message, "run_id")]


def _pattern_indexes(model: type, column: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
            [model._meta.db_table, f"%({column} varchar_pattern_ops)%"],
        )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.parametrize(("model", "column"), TEXT_KEYS)
def test_no_text_key_carries_a_pattern_index(model: type, column: str) -> None:
    """Those keys are matched by equality, never by prefix (the admin's searches are
    ``icontains``): a pattern index would only be written, on every turn (migration 0011)."""
    assert _pattern_indexes(model, column) == set()


@pytest.mark.parametrize(("model", "column"), TEXT_KEYS)
def test_text_keys_are_still_looked_up_through_an_index(model: type, column: str) -> None:
    """What the pattern index could serve, equality, an ordinary index serves."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN SELECT 1 FROM {model._meta.db_table} WHERE {column} = %s", ["x"])
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "Index" in plan and "Seq Scan" not in plan
