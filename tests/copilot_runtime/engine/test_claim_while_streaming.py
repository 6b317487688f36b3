"""A worker's first delivery of a run claims it while the model is already asked.

Marking the run running is the guard against executing a task twice; waiting for it before
asking the model put a database round trip before every relayed first token. A first delivery
(the broker says so) now asks the model at once, and counts as a turn whose write is in flight:
nothing of it is written, announced or acted on before the claim commits, and nothing at all
when the run was not pending (a duplicate, or a run stopped before it started).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import OperationalError

from conversations.models import Message, Run, RunEvent, RunStatus
from conversations.store import turn_store
from conversations.store.types import PreparedTurn
from copilot_runtime.engine.execute import run_execute
from copilot_runtime.engine.heartbeats import heartbeat_for_loop
from copilot_runtime.engine.service import turn_prepare
from copilot_runtime.events.request import TurnRequest
from copilot_runtime.graphql.turn_input import parse_generate_input
from tests.support.generate_e2e import generate_data, text_input

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True, params=["orm", "sql"], ids=["orm store", "postgresql store"])
def store(request: pytest.FixtureRequest) -> str:
    """Each test on both stores: the PostgreSQL one is the product's on PostgreSQL."""
    if request.param == "sql":
        request.getfixturevalue("pg_turn_store")
    return str(request.param)


CLAIM_DELAY_SECONDS = 0.3


def _request(thread_id: str) -> TurnRequest:
    directive = "FAKE: " + orjson.dumps({"tokens": 5, "delay_ms": 0}).decode()
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", directive)])
    return parse_generate_input(data, {})


async def _prepared(thread_id: str) -> tuple[PreparedTurn, TurnRequest]:
    """A pending run, as the web process leaves it for a worker."""
    request = _request(thread_id)
    prepared = await turn_prepare(user=AnonymousUser(), request=request, protocol="graphql")
    assert prepared.stored is None
    return prepared, request


async def _execute(prepared: PreparedTurn, request: TurnRequest) -> str:
    return await asyncio.wait_for(
        run_execute(
            run_id=prepared.run_id,
            thread_id=prepared.thread_id,
            request=request,
            prepared=prepared,
            claim_while_streaming=True,
        ),
        30,
    )


async def _stored(run_id: str) -> tuple[list[str], list[str], tuple[Any, ...]]:
    logged = RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("type", flat=True)
    events = [event_type async for event_type in logged]
    # The run's output (its input, the user's message, was stored with the turn).
    output = Message.objects.filter(run_id=run_id).exclude(role="user")
    messages = [role async for role in output.values_list("role", flat=True)]
    run = await Run.objects.aget(pk=run_id)
    return events, messages, (run.status, run.attempts, run.finished_at)


@pytest.fixture
def slow_claim(
    monkeypatch: pytest.MonkeyPatch, fake_upstream: Any, store: str
) -> list[dict[str, Any]]:
    """The claim takes CLAIM_DELAY_SECONDS; what had happened by the time it committed."""
    seen: list[dict[str, Any]] = []
    store_class = type(turn_store())
    mark_running = store_class.mark_running
    record_many = store_class.record_many
    written: list[float] = []

    async def slow_mark(self: Any, *, run_id: str, model: str) -> bool:
        await asyncio.sleep(CLAIM_DELAY_SECONDS)
        claimed = await mark_running(self, run_id=run_id, model=model)
        seen.append(
            {
                "claimed": claimed,
                "at": asyncio.get_running_loop().time(),
                "model_requests": fake_upstream.stats()["requests"],
                "writes_before": len(written),
            }
        )
        return claimed

    async def recording(self: Any, *, entries: Any) -> None:
        written.append(asyncio.get_running_loop().time())
        await record_many(self, entries=entries)

    monkeypatch.setattr(store_class, "mark_running", slow_mark)
    monkeypatch.setattr(store_class, "record_many", recording)
    return seen


async def test_the_model_is_asked_while_the_run_is_claimed_and_nothing_is_written_before(
    model_on_the_fake: None, fake_upstream: Any, slow_claim: list[dict[str, Any]]
) -> None:
    prepared, request = await _prepared("claim-first")

    assert await _execute(prepared, request) == RunStatus.SUCCEEDED

    [claim] = slow_claim
    assert claim["claimed"] is True
    # The model had been asked (and had answered: five tokens, no delay) before the claim
    # committed, and the run had written nothing yet.
    assert claim["model_requests"] == 1
    assert claim["writes_before"] == 0
    events, messages, (status, attempts, finished_at) = await _stored(prepared.run_id)
    assert events[-1] == "run_finished" and "text_delta" in events
    assert messages == ["assistant"]
    assert (status, attempts) == (RunStatus.SUCCEEDED, 1)
    assert finished_at is not None


async def test_a_duplicate_delivery_stores_and_tells_nothing(
    model_on_the_fake: None, fake_upstream: Any, slow_claim: list[dict[str, Any]]
) -> None:
    prepared, request = await _prepared("claim-duplicate")
    # Another delivery claimed the run first, and is executing it.
    assert await turn_store().mark_running(run_id=prepared.run_id, model="m") is True
    before = await _stored(prepared.run_id)

    assert await _execute(prepared, request) == ""

    assert await _stored(prepared.run_id) == before == ([], [], (RunStatus.RUNNING, 1, None))
    # The other delivery's claim, then this one's: it failed after the model had answered
    # (a slow claim), and what the model said was neither written nor told.
    assert [claim["claimed"] for claim in slow_claim] == [True, False]
    assert slow_claim[1]["model_requests"] == 1
    assert slow_claim[1]["writes_before"] == 0


async def test_a_duplicate_leaves_the_heartbeat_of_the_delivery_executing_the_run(
    model_on_the_fake: None,
) -> None:
    prepared, request = await _prepared("claim-heartbeat")
    assert await turn_store().mark_running(run_id=prepared.run_id, model="m") is True
    beat = heartbeat_for_loop()
    stops: list[str] = []
    # The delivery that claimed the run executes it on this very loop.
    beat.register(prepared.run_id, lambda: stops.append(prepared.run_id))
    try:
        assert await _execute(prepared, request) == ""
        assert prepared.run_id in beat._runs
    finally:
        beat.unregister(prepared.run_id)
    assert stops == []


async def test_a_run_stopped_before_its_claim_stores_nothing(
    model_on_the_fake: None, slow_claim: list[dict[str, Any]]
) -> None:
    prepared, request = await _prepared("claim-stopped")
    # Stopped while it waited on the queue: no longer pending when the claim comes.
    await Run.objects.filter(pk=prepared.run_id).aupdate(status=RunStatus.CANCELLED)

    assert await _execute(prepared, request) == ""

    assert [claim["claimed"] for claim in slow_claim] == [False]
    events, messages, (status, attempts, _finished_at) = await _stored(prepared.run_id)
    assert (events, messages, status, attempts) == ([], [], RunStatus.CANCELLED, 0)


async def test_a_claim_the_database_fails_stores_nothing_and_is_logged(
    model_on_the_fake: None,
    store: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    prepared, request = await _prepared("claim-failed")

    async def unreachable(self: Any, *, run_id: str, model: str) -> bool:
        raise OperationalError("the database went away")

    monkeypatch.setattr(type(turn_store()), "mark_running", unreachable)

    assert await _execute(prepared, request) == ""

    assert f"claiming run {prepared.run_id} failed" in caplog.text
    events, messages, (status, attempts, _finished_at) = await _stored(prepared.run_id)
    assert (events, messages, status, attempts) == ([], [], RunStatus.PENDING, 0)
