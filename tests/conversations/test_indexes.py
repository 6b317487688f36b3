"""The conversation tables carry no index that another one already covers: every row a turn
writes updates each index of its table, and the event log and the spans grow fastest."""

from __future__ import annotations

import pytest
from django.db import connection

from conversations.models import AgentState, Message, Run, RunEvent, Span, Thread

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", [Thread, Message, AgentState, Run, RunEvent, Span])
def test_no_index_is_a_leading_part_of_another(model: type) -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    plain = {
        name: tuple(found["columns"])
        for name, found in constraints.items()
        if found["index"] and not found["unique"] and not found["primary_key"]
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
