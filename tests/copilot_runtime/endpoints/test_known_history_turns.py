"""A continued thread's turn reads, checks and converts only its new messages.

A client re-sends the whole history with every turn; the process knows it from the thread's
previous turn (copilot_runtime/history), from the request's bytes to the model request and the
store's look-up. Counted per turn on one thread, for both protocols, through the front door as
a client's requests come: each count is the history's new messages (the previous turn's reply
and the new question), never the thread's length.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from conversations.models import Run
from conversations.store.pg import prepare as pg_prepare
from copilot_runtime.agui import run_input
from copilot_runtime.endpoints import front
from copilot_runtime.engine.model_messages import _Fold
from copilot_runtime.graphql import turn_input
from copilot_runtime.graphql.fastpath import variables as fast_variables
from copilot_runtime.graphql.fastpath.documents import client_mutation_printed
from tests.support.asgi_call import call
from tests.support.generate_e2e import generate_data, text_input, thread_rows, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

TURNS = 6
RUN_PATH = "/api/copilotkit/agent/default/run"
QUESTION = 'Question {n}\nFAKE: {{"tokens": 3}}'


class Counts:
    """What each turn read from bytes, checked, made of its messages, converted for the model
    and asked the database about, in messages."""

    def __init__(self) -> None:
        self.turns: list[collections.Counter[str]] = []

    def next_turn(self) -> None:
        self.turns.append(collections.Counter())

    def add(self, what: str, count: int = 1) -> None:
        self.turns[-1][what] += count

    def of(self, what: str) -> list[int]:
        return [turn[what] for turn in self.turns]


@pytest.fixture
def counts(
    monkeypatch: pytest.MonkeyPatch, fake_upstream: Any, pg_turn_store: None
) -> Iterator[Counts]:
    counted = Counts()
    read_body = front.read_body

    def reading(route: str, body: bytes) -> Any:
        read = read_body(route, body)
        if read is not None and read.raws is not None:
            known = read.known - read.lead if read.source is not None else 0
            counted.add("parsed", len(read.raws) - known)
        return read

    check = run_input._Checker.message

    def checking(self: Any, raw: Any, index: int) -> None:
        counted.add("checked")
        check(self, raw, index)

    plan = fast_variables._data_plan()

    def checking_v1(data: Any) -> Any:
        counted.add("checked", len(data["messages"]))
        return plan(data)

    own_rows = run_input._own_rows

    def making(message: dict[str, Any]) -> Any:
        counted.add("made")
        return own_rows(message)

    parse = turn_input.parse_input_message

    def making_v1(raw: dict[str, Any]) -> Any:
        counted.add("made")
        return parse(raw)

    add = _Fold.add

    def converting(self: _Fold, message: Any) -> None:
        counted.add("converted")
        add(self, message)

    look = pg_prepare.look

    async def asking(look_up: Any) -> Any:
        counted.add("asked", len(look_up.ids))
        return await look(look_up)

    monkeypatch.setattr(front, "read_body", reading)
    monkeypatch.setattr(run_input._Checker, "message", checking)
    monkeypatch.setattr(fast_variables, "_data_plan", lambda: checking_v1)
    monkeypatch.setattr(run_input, "_own_rows", making)
    monkeypatch.setattr(turn_input, "parse_input_message", making_v1)
    monkeypatch.setattr(_Fold, "add", converting)
    monkeypatch.setattr(pg_prepare, "look", asking)
    settings = {
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": fake_upstream.base_url,
        "OPENAI_MAX_RETRIES": 0,
        "MAX_BODY_BYTES": 1_000_000,
    }
    with override_settings(COPILOT_RUNTIME=settings):
        yield counted


def _stored(thread_id: str) -> list[tuple[str, str, str]]:
    return [(row.message_id, row.role, row.content) for row in thread_rows(thread_id)]


async def _finished(thread_id: str) -> list[tuple[str, str, str]]:
    """The thread's messages once its run has ended (the next turn would find it busy)."""

    def done() -> list[tuple[str, str, str]] | None:
        runs = Run.objects.filter(thread__thread_id=thread_id)
        finished = all(run.is_finished for run in runs)
        return _stored(thread_id) if finished and runs.exists() else None

    return await sync_to_async(wait_for)(done, what=f"the run on {thread_id} to end")


def _assert_only_new_messages(counts: Counts) -> None:
    new = [1] + [2] * (TURNS - 1)  # the reply to the previous question, and the new one
    for what in ("parsed", "checked", "made", "converted", "asked"):
        assert counts.of(what) == new, (what, counts.turns)


async def test_a_v2_thread_s_turn_costs_its_new_messages_only(counts: Counts) -> None:
    thread_id = "known-v2"
    history: list[dict[str, Any]] = []
    for n in range(TURNS):
        history.append({"id": f"u{n}", "role": "user", "content": QUESTION.format(n=n)})
        body = {
            "threadId": thread_id,
            "runId": f"known-v2-run-{n}",
            "tools": [],
            "context": [],
            "forwardedProps": {},
            "state": {},
            "messages": history,
        }
        counts.next_turn()

        reply = await call(RUN_PATH, orjson.dumps(body), headers={"accept": "text/event-stream"})

        assert reply.status == 200
        *_, (reply_id, role, content) = await _finished(thread_id)
        assert (role, content) == ("assistant", "t0 t1 t2")
        history.append({"id": reply_id, "role": "assistant", "content": content})

    _assert_only_new_messages(counts)


async def test_a_v1_thread_s_turn_costs_its_new_messages_only(counts: Counts) -> None:
    thread_id = "known-v1"
    history: list[dict[str, Any]] = []
    for n in range(TURNS):
        history.append(text_input(f"u{n}", QUESTION.format(n=n)))
        body = {
            "query": client_mutation_printed(),
            "operationName": "generateCopilotResponse",
            "variables": {"data": generate_data(thread_id=thread_id, messages=history)},
        }
        counts.next_turn()

        reply = await call(
            "/api/copilotkit",
            orjson.dumps(body),
            headers={"accept": "multipart/mixed, application/json"},
        )

        assert reply.status == 200
        *_, (reply_id, role, content) = await _finished(thread_id)
        assert (role, content) == ("assistant", "t0 t1 t2")
        history.append(text_input(reply_id, content, role="assistant"))

    _assert_only_new_messages(counts)
