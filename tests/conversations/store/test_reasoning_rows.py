"""A run's reasoning is stored as a message of its own, set aside like an agent state: a
history that leaves it out (as v1 clients and most v2 histories do) supersedes nothing, and a
regenerate supersedes a run's reasoning with the answer it led to. Both stores agree."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from conversations.models import Message, RunStatus
from conversations.services.messages import OutputMessage
from conversations.services.runs import RunOutcome, Usage
from conversations.store.orm import OrmTurnStore
from conversations.store.pg.store import PgTurnStore
from conversations.store.types import Progress
from tests.conversations.store.test_pg_store import history, messages_of, never_reap, record, text

pytestmark = pytest.mark.django_db(transaction=True)


async def _turn(
    store: Any, thread_id: str, messages: list[Any], output: list[OutputMessage]
) -> None:
    prepared = await store.prepare(turn=record(thread_id, [*messages]), reap=never_reap)
    if prepared.stored is not None:
        await prepared.stored
    await store.record(
        run_id=prepared.run_id,
        thread_pk=prepared.thread_pk,
        progress=Progress(
            events=[],
            messages=output,
            agent_states=[],
            outcome=RunOutcome(status=RunStatus.SUCCEEDED, usage=Usage()),
            first_position=prepared.next_position,
        ),
    )


def _answer(thread_id: str, n: int) -> list[OutputMessage]:
    return [
        OutputMessage(
            message_id=f"{thread_id}-r{n}",
            kind="reasoning",
            role="reasoning",
            content=f"thinking {n}",
            arguments={"encryptedValue": '{"anthropic.signature":"sig"}'},
        ),
        OutputMessage(message_id=f"{thread_id}-a{n}", kind="text", role="assistant", content="ok"),
    ]


def _superseded(thread_id: str) -> list[str]:
    rows = Message.objects.filter(thread__thread_id=thread_id, superseded=True)
    return list(rows.order_by("position").values_list("message_id", flat=True))


async def test_reasoning_rows_survive_histories_without_them_and_go_with_a_regenerate(
    pg: PgTurnStore,
) -> None:
    for store, thread_id in ((pg, "t-sql"), (OrmTurnStore(), "t-orm")):
        first = history("q0")
        await _turn(store, thread_id, first, _answer(thread_id, 0))
        # The next turn re-sends the answer but not the reasoning before it.
        second = [*first, text(f"{thread_id}-a0", "assistant", "ok"), text("q1", "user", "next")]
        await _turn(store, thread_id, second, _answer(thread_id, 1))
        assert await sync_to_async(_superseded)(thread_id) == []
        # A regenerate of the last answer: it and its reasoning are superseded, not the
        # first run's.
        await _turn(store, thread_id, second, _answer(thread_id, 2))
        assert await sync_to_async(_superseded)(thread_id) == [
            f"{thread_id}-r1",
            f"{thread_id}-a1",
        ]

    rows = await sync_to_async(messages_of)("t-sql")
    assert [row[1].replace("t-sql", "t") for row in rows] == [
        row[1].replace("t-orm", "t") for row in await sync_to_async(messages_of)("t-orm")
    ]
    reasoning = next(row for row in rows if row[1] == "t-sql-r0")
    assert reasoning[2:5] == ("reasoning", "reasoning", "thinking 0")
