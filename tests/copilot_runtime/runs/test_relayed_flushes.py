"""When a run executed for followers elsewhere (a Celery worker) writes and announces its events.

Such a run reaches its followers through the channel layer and its log. Its first token is
announced at once, and what the run emitted before it goes out with it rather than in a batch
of its own that the first token would queue behind; that batch is written with the run's next
write (one statement where it took two). A model slow to answer does not hold the earlier
events back longer than one flush interval. Everything after the first token is written
before it is announced.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from conversations.models import RunEvent, RunStatus
from conversations.store import turn_store
from copilot_runtime.events.request import TurnRequest
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.runs.execute import run_execute
from copilot_runtime.runs.log_writer import next_flush_at
from copilot_runtime.runs.start import turn_prepare
from tests.support.generate_e2e import generate_data, text_input

pytestmark = pytest.mark.django_db(transaction=True)

TEXT_DELTA = "text_delta"


class Writes:
    """The event types of each write of the run's log, in order, with the loop time of each."""

    def __init__(self) -> None:
        self.types: list[list[str]] = []
        self.times: list[float] = []

    def add(self, types: list[str]) -> None:
        if types:
            self.types.append(types)
            self.times.append(asyncio.get_running_loop().time())

    def first_with_a_token(self) -> int:
        return next(i for i, types in enumerate(self.types) if TEXT_DELTA in types)


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Writes]:
    seen = Writes()
    store_class = type(turn_store())
    record_many = store_class.record_many

    async def recording(self: Any, *, entries: Any) -> None:
        for entry in entries:
            seen.add([event.type for event in entry.progress.events])
        await record_many(self, entries=entries)

    monkeypatch.setattr(store_class, "record_many", recording)
    yield seen


def _request(tokens: int, delay_ms: int) -> TurnRequest:
    directive = "FAKE: " + orjson.dumps({"tokens": tokens, "delay_ms": delay_ms}).decode()
    data = generate_data(
        thread_id=f"relayed-{tokens}-{delay_ms}", messages=[text_input("u1", directive)]
    )
    return parse_generate_input(data, {})


async def _execute_as_a_worker(
    fake_upstream: Any, *, tokens: int, delay_ms: int, flush_ms: int
) -> str:
    """The run executed as a worker executes it: no watcher in this process. Its run id."""
    request = _request(tokens, delay_ms)
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
            "EVENT_FLUSH_MS": flush_ms,
        }
    ):
        prepared = await turn_prepare(user=AnonymousUser(), request=request, protocol="graphql")
        status = await asyncio.wait_for(
            run_execute(run_id=prepared.run_id, thread_id=prepared.thread_id, request=request),
            30,
        )
    assert status == RunStatus.SUCCEEDED
    return prepared.run_id


async def _logged_types(run_id: str) -> list[str]:
    rows = RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("type", flat=True)
    return [event_type async for event_type in rows]


def _announced_batches(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The event types of each batch announced to the run's followers, in order."""
    from copilot_runtime.runs import flusher as flusher_module
    from copilot_runtime.runs import log_writer as log_writer_module

    announced: list[list[str]] = []
    announce_batch = flusher_module.announce_batch
    announce_batches = log_writer_module.announce_batches

    async def announcing(run_id: str, events: Any) -> None:
        announced.append([event.type for event in events])
        await announce_batch(run_id, events)

    async def announcing_many(batches: Any) -> None:
        announced.extend([event.type for event in events] for _, events in batches if events)
        await announce_batches(batches)

    monkeypatch.setattr(flusher_module, "announce_batch", announcing)
    monkeypatch.setattr(log_writer_module, "announce_batches", announcing_many)
    return announced


async def test_the_events_before_the_first_token_are_announced_and_written_with_it(
    fake_upstream: Any, writes: Writes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long interval: nothing but the first token and the run's end cuts it short. The
    # flushes of every run fall on one grid of the interval (next_flush_at): the run starts
    # just after a point of it, so that the next one is a whole interval away rather than, by
    # chance, closer than the first token (which failed a few percent of runs).
    loop = asyncio.get_running_loop()
    await asyncio.sleep(next_flush_at(last_flush=loop.time(), interval=2.0) - loop.time() + 0.01)
    announced = _announced_batches(monkeypatch)
    run_id = await _execute_as_a_worker(fake_upstream, tokens=5, delay_ms=20, flush_ms=2000)
    logged = await _logged_types(run_id)
    before_token = logged[: logged.index(TEXT_DELTA)]
    assert before_token  # the run emits events before the model's first token
    # One announcement carries them and the first token (at once, not at the interval) ...
    assert announced[0] == [*before_token, TEXT_DELTA], announced
    # ... and one write, the run's next (here its end: the interval is long).
    assert writes.first_with_a_token() == 0, writes.types
    assert writes.types[0][: len(before_token) + 1] == [*before_token, TEXT_DELTA]
    assert [t for batch in writes.types for t in batch] == logged  # each event written once
    assert [t for batch in announced for t in batch] == logged  # and announced once


async def test_a_model_slow_to_answer_holds_the_earlier_events_one_interval_at_most(
    fake_upstream: Any, writes: Writes
) -> None:
    # The first token comes 400 ms after the model call; the interval is 50 ms.
    run_id = await _execute_as_a_worker(fake_upstream, tokens=2, delay_ms=400, flush_ms=50)
    logged = await _logged_types(run_id)
    assert writes.first_with_a_token() == 1, writes.types  # the earlier events went first
    assert writes.types[0] == logged[: len(writes.types[0])]
    assert writes.times[1] - writes.times[0] > 0.2  # at the interval, not with the token


async def test_the_runs_finish_is_written_and_announced_only_with_its_end(
    fake_upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pricing the run's model calls reads the price table now and then (a thread hop and a
    # query). A flush falling due meanwhile logged and announced run_finished ahead of the
    # run's status: a client told the run had finished sent its follow-up at once and found
    # the thread busy (once in ~1,300 turns of the celery shape).
    from copilot_runtime.tracing import tracer as tracer_module

    prices_cached = tracer_module.prices_cached

    async def slow_price_table() -> Any:
        await asyncio.sleep(0.15)  # several flush intervals
        return await prices_cached()

    monkeypatch.setattr(tracer_module, "prices_cached", slow_price_table)
    entries: list[tuple[list[str], bool]] = []
    store_class = type(turn_store())
    record_many = store_class.record_many

    async def recording(self: Any, **kwargs: Any) -> None:
        for entry in kwargs["entries"]:
            types = [event.type for event in entry.progress.events]
            entries.append((types, entry.progress.outcome is not None))
        await record_many(self, **kwargs)

    monkeypatch.setattr(store_class, "record_many", recording)

    run_id = await _execute_as_a_worker(fake_upstream, tokens=3, delay_ms=0, flush_ms=20)

    finishing = [has_outcome for types, has_outcome in entries if "run_finished" in types]
    assert finishing == [True], entries
    assert (await _logged_types(run_id))[-1] == "run_finished"


async def test_the_first_token_is_announced_at_once_and_written_with_the_runs_next_write(
    fake_upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The followers of a relayed run wait for its first token alone: its batch is told
    # before any round trip to the database, and written with the run's next batch rather
    # than in a statement of its own. Everything else is told only once it is written (a
    # client told of the run's end may send its next turn at once).
    from copilot_runtime.runs import flusher as flusher_module
    from copilot_runtime.runs import log_writer as log_writer_module

    steps: list[tuple[str, list[str]]] = []
    announce_batch = flusher_module.announce_batch

    async def announcing(run_id: str, events: Any) -> None:
        steps.append(("announced", [event.type for event in events]))
        await announce_batch(run_id, events)

    announce_batches = log_writer_module.announce_batches

    async def announcing_many(batches: Any) -> None:
        for _, events in batches:
            steps.append(("announced", [event.type for event in events]))
        await announce_batches(batches)

    store_class = type(turn_store())
    record_many = store_class.record_many

    async def recording(self: Any, *, entries: Any) -> None:
        for entry in entries:
            steps.append(("written", [event.type for event in entry.progress.events]))
        await record_many(self, entries=entries)

    monkeypatch.setattr(flusher_module, "announce_batch", announcing)
    monkeypatch.setattr(log_writer_module, "announce_batches", announcing_many)
    monkeypatch.setattr(store_class, "record_many", recording)
    # Tokens 50 ms apart and a long interval: the first token's batch is told alone, and
    # written with the rest at the run's end. (Started just after a point of the flushes'
    # grid, whose next point is then a whole interval away.)
    loop = asyncio.get_running_loop()
    await asyncio.sleep(next_flush_at(last_flush=loop.time(), interval=2.0) - loop.time() + 0.01)
    run_id = await _execute_as_a_worker(fake_upstream, tokens=3, delay_ms=50, flush_ms=2000)

    first = next(i for i, (_, types) in enumerate(steps) if TEXT_DELTA in types)
    assert steps[first][0] == "announced", steps
    told = steps[first][1]
    step, written = steps[first + 1]
    assert step == "written" and written[: len(told)] == told, steps
    assert written[-1] == "run_finished", steps  # one write: the first token's and the end's
    assert steps[first + 2] == ("announced", written[len(told) :]), steps  # the rest, once
    logged = await _logged_types(run_id)
    assert [t for step, types in steps if step == "written" for t in types] == logged
    assert [t for step, types in steps if step == "announced" for t in types] == logged


async def test_a_first_token_whose_write_fails_is_written_and_told_again_with_the_next(
    fake_upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Announced before its write, the first token has reached the followers when the
    # database refuses the write that carries it (the next point of the grid): the batch is
    # kept, written ahead of the next one and announced again (followers skip the sequence
    # numbers they had), and the log ends whole.
    from copilot_runtime.runs import flusher as flusher_module

    announced: list[list[int]] = []
    announce_batch = flusher_module.announce_batch

    async def announcing(run_id: str, events: Any) -> None:
        announced.append([event.seq for event in events])
        await announce_batch(run_id, events)

    store_class = type(turn_store())
    record_many = store_class.record_many
    refused: list[list[str]] = []

    async def refusing_the_first_token_once(self: Any, *, entries: Any) -> None:
        types = [event.type for entry in entries for event in entry.progress.events]
        if TEXT_DELTA in types and not refused:
            refused.append(types)
            raise RuntimeError("the database hiccuped")
        await record_many(self, entries=entries)

    monkeypatch.setattr(flusher_module, "announce_batch", announcing)
    monkeypatch.setattr(store_class, "record_many", refusing_the_first_token_once)
    # Tokens 50 ms apart and a 60 ms grid: the grid's next point comes before the run's end.
    run_id = await _execute_as_a_worker(fake_upstream, tokens=5, delay_ms=50, flush_ms=60)

    assert refused, "the first token's write was never refused"
    assert "run_finished" not in refused[0]  # a write at the grid, not the run's end
    first_token_seqs = announced[0]
    # Before its write, and again with the retry.
    assert any(set(first_token_seqs) <= set(seqs) for seqs in announced[1:]), announced
    rows = RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("seq", flat=True)
    seqs = [seq async for seq in rows]
    assert seqs == list(range(1, len(seqs) + 1))  # whole: no hole, nothing twice
    assert set(first_token_seqs) <= set(seqs)
    assert (await _logged_types(run_id))[-1] == "run_finished"
