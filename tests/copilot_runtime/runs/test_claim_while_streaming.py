"""A worker's first delivery of a run claims it while the model is already asked.

Marking the run running is the guard against executing a task twice; waiting for it before
asking the model put a database round trip before every relayed first token. A first delivery
(the broker says so) now asks the model at once, and counts as a turn whose write is in flight:
nothing of it is written, announced or acted on before the claim commits, and nothing at all
when the run was not pending (a duplicate, or a run stopped before it started).

A fresh first delivery on Redis's pub/sub layer claims the run in Redis instead, and its start
is recorded with its first write (copilot_runtime/runs/claim_redis.py): the last tests here.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import OperationalError
from django.test import override_settings

from conversations.models import Message, Run, RunEvent, RunStatus, Span
from conversations.store import turn_store
from conversations.store.types import PreparedTurn
from copilot_runtime.events import Event
from copilot_runtime.events.request import TurnRequest
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.runs import claim as run_claim
from copilot_runtime.runs.claim_redis import KEY_PREFIX, claim_in_layer, claim_in_layer_announcing
from copilot_runtime.runs.execute import Claim, run_execute
from copilot_runtime.runs.heartbeats import heartbeat_for_loop
from copilot_runtime.runs.recorder import RunRecorder
from copilot_runtime.runs.relay import run_group
from copilot_runtime.runs.start import turn_prepare
from tests.copilot_runtime.runs.conftest import claims_redis_url
from tests.support.generate_e2e import generate_data, text_input
from tests.support.waiting import eventually

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True, params=["orm", "sql"], ids=["orm store", "postgresql store"])
def store(request: pytest.FixtureRequest) -> str:
    """Each test on both stores: the PostgreSQL one is the product's on PostgreSQL."""
    if request.param == "sql":
        request.getfixturevalue("pg_turn_store")
    return str(request.param)


CLAIM_DELAY_SECONDS = 0.3


def _request(thread_id: str, *, tokens: int = 5, delay_ms: int = 0) -> TurnRequest:
    directive = "FAKE: " + orjson.dumps({"tokens": tokens, "delay_ms": delay_ms}).decode()
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", directive)])
    return parse_generate_input(data, {})


async def _prepared(thread_id: str, **directive: int) -> tuple[PreparedTurn, TurnRequest]:
    """A pending run, as the web process leaves it for a worker."""
    request = _request(thread_id, **directive)
    prepared = await turn_prepare(user=AnonymousUser(), request=request, protocol="graphql")
    assert prepared.stored is None
    return prepared, request


async def _execute(
    prepared: PreparedTurn, request: TurnRequest, *, claim_in_redis: bool = False
) -> str:
    return await asyncio.wait_for(
        run_execute(
            run_id=prepared.run_id,
            thread_id=prepared.thread_id,
            request=request,
            prepared=prepared,
            claim=Claim.WHILE_ASKING_IN_REDIS if claim_in_redis else Claim.WHILE_ASKING,
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


# --- claimed in Redis ---------------------------------------------------------------------


@pytest.fixture
def never_marked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The runs the database was asked to mark running (a claim taken in Redis asks none)."""
    marked: list[str] = []
    store_class = type(turn_store())
    mark_running = store_class.mark_running

    async def counting(self: Any, *, run_id: str, model: str) -> bool:
        marked.append(run_id)
        return await mark_running(self, run_id=run_id, model=model)

    monkeypatch.setattr(store_class, "mark_running", counting)
    return marked


# A message of the test's own, sent to the run's group after the run: heard, it is the end of
# what the run announced.
_BARRIER = {"type": "test.barrier"}


def _told_the_end(heard: list[Any]) -> bool:
    return bool(heard) and heard[-1]["events"][-1][1] == "run_finished"


@contextlib.asynccontextmanager
async def _told(layer: Any, run_id: str, *, told_nothing: bool = False) -> AsyncIterator[list[Any]]:
    """What is announced of ``run_id`` while the block runs, up to its ``run_finished``; with
    ``told_nothing``, up to a message the test sends after the block."""
    channel = await layer.new_channel()
    await layer.group_add(run_group(run_id), channel)
    heard: list[Any] = []

    async def listen() -> None:
        while True:
            heard.append(await layer.receive(channel))

    listening = asyncio.ensure_future(listen())
    try:
        yield heard
        if told_nothing:
            await layer.group_send(run_group(run_id), _BARRIER)
            await eventually(lambda: _BARRIER in heard, what="the test's own announcement")
            heard.remove(_BARRIER)
        else:
            await eventually(lambda: _told_the_end(heard), what="the run's run_finished")
    finally:
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listening


async def test_a_run_claimed_in_redis_goes_from_pending_to_its_end_in_its_one_write(
    model_on_the_fake: None, pubsub_layer: Any, never_marked: list[str]
) -> None:
    prepared, request = await _prepared("redis-claim-short")
    async with _told(pubsub_layer, prepared.run_id) as heard:
        assert await _execute(prepared, request, claim_in_redis=True) == RunStatus.SUCCEEDED

    assert never_marked == []
    events, messages, (status, attempts, finished_at) = await _stored(prepared.run_id)
    assert events[-1] == "run_finished" and "text_delta" in events
    assert messages == ["assistant"]
    assert (status, attempts) == (RunStatus.SUCCEEDED, 1)
    run = await Run.objects.aget(pk=prepared.run_id)
    assert run.started_at is not None and finished_at is not None
    # Its start and end are its run span's (one clock for the run and its span).
    root = await Span.objects.aget(run_id=prepared.run_id, parent_span_id="")
    assert (run.started_at, finished_at) == (root.started_at, root.ended_at)
    assert run.heartbeat_at is not None and run.started_at <= finished_at
    assert run.model != ""  # recorded with the start (the adapter's default model here)
    assert heard  # its followers were told
    # Taken: another delivery of the task is refused.
    assert await claim_in_layer(prepared.run_id) is False


async def test_a_run_claimed_in_redis_is_recorded_running_by_its_first_write(
    model_on_the_fake: None, pubsub_layer: Any, never_marked: list[str]
) -> None:
    prepared, request = await _prepared("redis-claim-long", tokens=12, delay_ms=60)
    execution = asyncio.ensure_future(_execute(prepared, request, claim_in_redis=True))
    try:

        async def running() -> Run:
            while True:
                run = await Run.objects.aget(pk=prepared.run_id)
                if run.status != RunStatus.PENDING:
                    return run
                await asyncio.sleep(0.01)

        # Recorded by the run's first batch, while the model still streams.
        run = await asyncio.wait_for(running(), 5)
        assert run.status == RunStatus.RUNNING and not execution.done()
        assert run.started_at is not None and run.attempts == 1
        assert run.heartbeat_at is not None
        assert await RunEvent.objects.filter(run_id=prepared.run_id).aexists()
    finally:
        assert await execution == RunStatus.SUCCEEDED
    assert never_marked == []
    ended = await Run.objects.aget(pk=prepared.run_id)
    assert (ended.status, ended.attempts) == (RunStatus.SUCCEEDED, 1)
    # Recorded running by its first write; its end writes its run span's start and end.
    root = await Span.objects.aget(run_id=prepared.run_id, parent_span_id="")
    assert (ended.started_at, ended.finished_at) == (root.started_at, root.ended_at)


async def test_a_delivery_whose_run_redis_gave_another_stores_and_tells_nothing(
    model_on_the_fake: None, pubsub_layer: Any, never_marked: list[str]
) -> None:
    prepared, request = await _prepared("redis-claim-duplicate")
    assert await claim_in_layer(prepared.run_id) is True  # the other delivery's
    async with _told(pubsub_layer, prepared.run_id, told_nothing=True) as heard:
        assert await _execute(prepared, request, claim_in_redis=True) == ""

    assert heard == [] and never_marked == []
    assert await _stored(prepared.run_id) == ([], [], (RunStatus.PENDING, 0, None))


async def test_a_claim_redis_cannot_take_is_taken_in_the_database(
    model_on_the_fake: None,
    pubsub_layer: Any,
    never_marked: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    prepared, request = await _prepared("redis-claim-unreachable")

    async def unreachable(run_id: str, *_: Any) -> bool | None:
        raise ConnectionError("Redis went away")

    # Neither on its own nor with the first token's announcement.
    monkeypatch.setattr(run_claim, "claim_in_layer", unreachable)
    monkeypatch.setattr(run_claim, "announce_claiming", unreachable)

    assert await _execute(prepared, request, claim_in_redis=True) == RunStatus.SUCCEEDED

    assert never_marked == [prepared.run_id]
    assert f"claiming run {prepared.run_id} in Redis failed" in caplog.text
    events, _messages, (status, attempts, _finished_at) = await _stored(prepared.run_id)
    assert events[-1] == "run_finished" and (status, attempts) == (RunStatus.SUCCEEDED, 1)


async def test_without_redis_a_fresh_first_delivery_claims_in_the_database(
    model_on_the_fake: None, never_marked: list[str]
) -> None:
    prepared, request = await _prepared("redis-claim-no-layer")

    assert await _execute(prepared, request, claim_in_redis=True) == RunStatus.SUCCEEDED

    assert never_marked == [prepared.run_id]
    assert await claim_in_layer(prepared.run_id) is None


@contextlib.contextmanager
def runtime_settings_overridden(**changed: Any) -> Iterator[None]:
    """The runtime's settings in force, with ``changed`` on top."""
    with override_settings(COPILOT_RUNTIME={**settings.COPILOT_RUNTIME, **changed}):
        yield


@pytest.fixture
def claims_alone(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The runs whose Redis claim was taken on its own, not with an announcement."""
    alone: list[str] = []

    async def counting(run_id: str) -> bool | None:
        alone.append(run_id)
        return await claim_in_layer(run_id)

    monkeypatch.setattr(run_claim, "claim_in_layer", counting)
    return alone


async def test_the_claim_rides_on_the_first_tokens_announcement(
    model_on_the_fake: None,
    pubsub_layer: Any,
    never_marked: list[str],
    claims_alone: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # However loaded the machine, the first token comes within the window, and no write of
    # what the run emitted before it falls due first (a write would take the claim alone).
    monkeypatch.setattr(run_claim, "CLAIM_FOLD_SECONDS", 30.0)
    prepared, request = await _prepared("redis-claim-folded")
    async with _told(pubsub_layer, prepared.run_id) as heard:
        with runtime_settings_overridden(EVENT_FLUSH_MS=30_000):
            assert await _execute(prepared, request, claim_in_redis=True) == RunStatus.SUCCEEDED

    # No claim of its own, in Redis or in the database: the first token's announcement took
    # it, and was heard first.
    assert claims_alone == [] and never_marked == []
    assert await claim_in_layer(prepared.run_id) is False
    first = heard[0]["events"]
    assert "text_delta" in [event_type for _seq, event_type, _payload in first]
    assert heard[-1]["events"][-1][1] == "run_finished"
    events, _messages, (status, attempts, _finished_at) = await _stored(prepared.run_id)
    assert events[-1] == "run_finished" and (status, attempts) == (RunStatus.SUCCEEDED, 1)


async def test_a_model_slower_than_the_fold_window_claims_on_its_own_first(
    model_on_the_fake: None,
    pubsub_layer: Any,
    never_marked: list[str],
    claims_alone: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run_claim, "CLAIM_FOLD_SECONDS", 0.0)
    prepared, request = await _prepared("redis-claim-alone", tokens=3, delay_ms=100)
    async with _told(pubsub_layer, prepared.run_id) as heard:
        assert await _execute(prepared, request, claim_in_redis=True) == RunStatus.SUCCEEDED

    assert claims_alone == [prepared.run_id] and never_marked == []
    assert heard and heard[-1]["events"][-1][1] == "run_finished"
    events, _messages, (status, attempts, _finished_at) = await _stored(prepared.run_id)
    assert "text_delta" in events and (status, attempts) == (RunStatus.SUCCEEDED, 1)


async def test_the_first_tokens_announcement_leaves_before_the_run_reads_on(
    model_on_the_fake: None,
    pubsub_layer: Any,
    never_marked: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A model answering at once hands the run much of its reply in one read. The script that
    # claims the run and announces its first token is written to Redis before the run parses
    # the rest: it waits neither for a task of its own to start nor for redis-py's turns of
    # the loop.
    monkeypatch.setattr(run_claim, "CLAIM_FOLD_SECONDS", 30.0)
    prepared, request = await _prepared("redis-claim-at-once", tokens=50)
    key = KEY_PREFIX + prepared.run_id
    # As on a worker that has claimed runs before: a connection to Redis is open already.
    assert await claim_in_layer_announcing("warming-" + prepared.run_id, []) is True
    observer = redis.Redis.from_url(claims_redis_url())
    emitted: list[str] = []
    claimed_when_read_on: list[bool] = []
    observe = RunRecorder.observe

    def counting(self: RunRecorder, event: Event) -> None:
        emitted.append(event.type)
        if event.type == "text_delta" and emitted.count("text_delta") == 2:
            # The event loop is held here: only a script already written can set the key.
            give_up = time.monotonic() + 2
            while not observer.exists(key) and time.monotonic() < give_up:
                time.sleep(0.001)
            claimed_when_read_on.append(bool(observer.exists(key)))
        observe(self, event)

    monkeypatch.setattr(RunRecorder, "observe", counting)
    try:
        with runtime_settings_overridden(EVENT_FLUSH_MS=30_000):
            status = await _execute(prepared, request, claim_in_redis=True)
    finally:
        observer.close()

    assert status == RunStatus.SUCCEEDED
    assert claimed_when_read_on == [True]  # the reply came in more than one delta, too
    assert never_marked == []
