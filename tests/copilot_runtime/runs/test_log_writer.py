"""What the runs on one event loop write as they go is written (and announced) together.

Each test runs on both stores: the ORM one and the raw SQL one that serves PostgreSQL in
production. Their ``record_many`` (every write of either store goes through it) is wrapped only
to see which runs' batches each statement carried (and, where a test says so, to refuse one).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings
from django.utils import timezone

from conversations.models import Run, RunEvent, RunStatus, Thread, ThreadStatus
from conversations.services.runs import LoggedEvent, RunOutcome, Usage
from conversations.store import turn_store, turn_store_close
from conversations.store.types import Progress, RunProgress
from copilot_runtime.conf import runtime_settings
from copilot_runtime.events import RunFinished
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.runs.log_writer import LoopLogWriter, log_writer_for_loop, next_flush_at
from copilot_runtime.runs.relay import BATCH_MESSAGE, run_group
from copilot_runtime.runs.start import turn_start

pytestmark = pytest.mark.django_db(transaction=True)

IN_MEMORY_LAYER = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


class Statements:
    """The batches of each ``record_many`` call, as (run id, seqs), the runs whose first
    tokens' times it carried, and the runs whose end it carried."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, list[int]]]] = []
        self.first_tokens: list[list[str]] = []
        self.ends: list[list[str]] = []
        self.hold: asyncio.Event | None = None  # set: the first call waits for it
        self.refuse_first = False  # the first call fails, as a database that hiccuped
        self.refuse_first_token = False  # so does the first call carrying a first token
        self.called = asyncio.Event()

    def runs_per_call(self) -> list[list[str]]:
        return [[run_id for run_id, _ in call] for call in self.calls]


@pytest.fixture(params=["orm", "sql"])
def statements(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Statements]:
    # tests/conftest.py makes the in-process store the ORM one; "auto" is the SQL one here.
    monkeypatch.setenv("COPILOT_RUNTIME_TURN_STORE", "orm" if request.param == "orm" else "auto")
    runtime_settings.cache_clear()
    seen = Statements()
    store_class = type(turn_store())
    assert store_class.__name__ == {"orm": "OrmTurnStore", "sql": "PgTurnStore"}[request.param]
    original = store_class.record_many

    async def recording(self: Any, *, entries: Sequence[RunProgress]) -> None:
        seen.calls.append([(e.run_id, [event.seq for event in e.progress.events]) for e in entries])
        seen.first_tokens.append([e.run_id for e in entries if e.progress.first_token_at])
        seen.ends.append([e.run_id for e in entries if e.progress.outcome is not None])
        seen.called.set()
        if seen.hold is not None and len(seen.calls) == 1:
            await seen.hold.wait()
        if seen.refuse_first and len(seen.calls) == 1:
            raise RuntimeError("the database refused the batch")
        if (
            seen.refuse_first_token
            and seen.first_tokens[-1]
            and sum(map(bool, seen.first_tokens)) == 1
        ):
            raise RuntimeError("the database refused the batch")
        await original(self, entries=entries)

    monkeypatch.setattr(store_class, "record_many", recording)
    try:
        with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
            yield seen
    finally:
        monkeypatch.undo()
        runtime_settings.cache_clear()  # read again without this test's store


@pytest.fixture(autouse=True)
async def _close_sql_pools() -> AsyncIterator[None]:
    yield
    await turn_store_close()  # the SQL store's pool, opened on this test's loop


async def make_runs(*names: str) -> list[str]:
    for name in names:
        # As a prepared turn leaves them: the thread running its run.
        thread = await Thread.objects.acreate(
            thread_id=f"thread-{name}", status=ThreadStatus.RUNNING
        )
        await Run.objects.acreate(id=name, thread=thread, status=RunStatus.RUNNING)
    return list(names)


def deltas(*seqs: int, first_token_at: dt.datetime | None = None) -> Progress:
    return Progress(
        events=[
            LoggedEvent(seq=seq, type="text_delta", payload={"delta": f"w{seq}"}) for seq in seqs
        ],
        messages=[],
        agent_states=[],
        first_token_at=first_token_at,
    )


def ended(seq: int) -> Progress:
    """A run's last batch: its last event and its end."""
    return Progress(
        events=[LoggedEvent(seq=seq, type="run_finished", payload={"status": "succeeded"})],
        messages=[],
        agent_states=[],
        outcome=RunOutcome(status=RunStatus.SUCCEEDED, usage=Usage(output_tokens=seq)),
    )


async def logged(run_id: str) -> list[int]:
    return [
        seq async for seq in RunEvent.objects.filter(run_id=run_id).values_list("seq", flat=True)
    ]


def test_every_run_flushes_at_the_same_points_of_the_interval_grid() -> None:
    interval = 0.03
    # Two runs whose last writes fell in the same interval are due at the very same moment
    # (their timers then fire together): equal floats, not merely close ones.
    assert next_flush_at(last_flush=100.001, interval=interval) == next_flush_at(
        last_flush=100.019, interval=interval
    )
    due = next_flush_at(last_flush=100.001, interval=interval)
    assert 100.001 < due <= 100.001 + interval
    # A write on a grid point waits for the next one: at most one write per interval.
    assert next_flush_at(last_flush=due, interval=interval) > due


async def test_batches_handed_over_in_one_turn_of_the_loop_are_one_statement(
    statements: Statements,
) -> None:
    runs = await make_runs("a", "b", "c")
    writer = LoopLogWriter()
    await asyncio.gather(
        writer.write(run_id="a", thread_pk=None, progress=deltas(1, 2)),
        writer.write(run_id="b", thread_pk=None, progress=deltas(1)),
        writer.write(run_id="c", thread_pk=None, progress=deltas(7)),
    )
    assert statements.runs_per_call() == [runs]
    assert [await logged(run) for run in runs] == [[1, 2], [1], [7]]


async def test_first_token_times_handed_over_together_go_in_the_same_statement(
    statements: Statements,
) -> None:
    runs = await make_runs("a", "b", "c")
    first = timezone.now()
    writer = LoopLogWriter()
    await asyncio.gather(
        writer.write(run_id="a", thread_pk=None, progress=deltas(1, first_token_at=first)),
        writer.write(run_id="b", thread_pk=None, progress=deltas(3)),
        writer.write(
            run_id="c", thread_pk=None, progress=deltas(1, first_token_at=first + dt.timedelta(1))
        ),
    )
    assert statements.runs_per_call() == [runs]
    assert statements.first_tokens == [["a", "c"]]
    assert [(await Run.objects.aget(pk=run)).first_token_at for run in runs] == [
        first,
        None,
        first + dt.timedelta(1),
    ]


async def written_during_a_held_write(statements: Statements, later: Progress) -> None:
    """Runs "a" to "d": "a" logs a batch and its write is held in flight; "b", "c" and "d"
    hand ``later`` over meanwhile; then the write is released."""
    await make_runs("a", "b", "c", "d")
    statements.hold = asyncio.Event()
    writer = LoopLogWriter()
    first = asyncio.create_task(writer.write(run_id="a", thread_pk=None, progress=deltas(1)))
    await statements.called.wait()
    handed = [
        asyncio.create_task(writer.write(run_id=run, thread_pk=None, progress=later))
        for run in ("b", "c", "d")
    ]
    await asyncio.sleep(0.05)
    assert statements.runs_per_call() == [["a"]]  # one write in flight at a time
    statements.hold.set()
    await asyncio.gather(first, *handed)


async def test_batches_handed_over_during_a_write_are_the_next_statement(
    statements: Statements,
) -> None:
    await written_during_a_held_write(statements, deltas(1))
    assert statements.runs_per_call() == [["a"], ["b", "c", "d"]]


async def test_a_batch_that_cannot_be_logged_fails_its_own_run_only(
    statements: Statements,
) -> None:
    await make_runs("a", "b", "logged")
    writer = LoopLogWriter()
    await writer.write(run_id="logged", thread_pk=None, progress=deltas(1))
    layer = get_channel_layer()
    channel = await layer.new_channel()
    for run in ("a", "logged", "b"):
        await layer.group_add(run_group(run), channel)
    results = await asyncio.gather(
        writer.write(run_id="a", thread_pk=None, progress=deltas(1)),
        # Its first event again: the log holds one seq 1 per run.
        writer.write(run_id="logged", thread_pk=None, progress=deltas(1)),
        writer.write(run_id="b", thread_pk=None, progress=deltas(1)),
        return_exceptions=True,
    )
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], Exception)
    # The statement for all three failed as a whole; each was then written on its own.
    assert statements.runs_per_call()[1:] == [["a", "logged", "b"], ["a"], ["logged"], ["b"]]
    assert [await logged("a"), await logged("b")] == [[1], [1]]
    # Only what was logged is announced.
    announced = []
    while True:
        try:
            message = await asyncio.wait_for(layer.receive(channel), 0.2)
        except TimeoutError:
            break
        assert message["type"] == BATCH_MESSAGE
        announced.append(message["events"])
    assert announced == [[[1, "text_delta", {"delta": "w1"}]]] * 2


def _request(text: str, *, thread_id: str) -> Any:
    return parse_generate_input(
        {
            "threadId": thread_id,
            "frontend": {"actions": []},
            "messages": [
                {
                    "id": f"{thread_id}-u1",
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "textMessage": {"content": text, "role": "user"},
                }
            ],
            "metadata": {"requestType": "Chat"},
        },
        {},
    )


async def stream_runs(fake_upstream: Any, count: int) -> list[str]:
    """``count`` runs streaming at once (200 tokens 5 ms apart, flushed every 20 ms), to their
    end; their run ids. The runs start one after the other, each after its turn's write: at 40
    tokens, a machine whose writes took tens of milliseconds had the first run nearly done
    before the last began, and few writes found all three streaming."""
    directive = "FAKE: " + orjson.dumps({"tokens": 200, "delay_ms": 5}).decode()
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
            "INLINE_EVENT_FLUSH_MS": 20,
        }
    ):
        started = [
            await turn_start(
                user=AnonymousUser(),
                request=_request(directive, thread_id=f"t{n}"),
                protocol="graphql",
            )
            for n in range(count)
        ]
        for turn in started:
            while (event := await asyncio.wait_for(turn.events.get(), 10)) is not None:
                last = event
            assert isinstance(last, RunFinished)
        for _ in range(200):  # the run's end is written after its last event is published
            if all([(await Run.objects.aget(pk=t.run_id)).is_finished for t in started]):
                break
            await asyncio.sleep(0.025)
    return [turn.run_id for turn in started]


async def assert_logged_whole(run_id: str) -> None:
    seqs = await logged(run_id)
    assert seqs == list(range(1, len(seqs) + 1))  # no gap, in order
    last = await sync_to_async(RunEvent.objects.filter(run_id=run_id).order_by("seq").last)()
    assert last is not None and last.type == RunFinished.type


async def test_runs_streaming_at_once_share_their_log_writes(
    statements: Statements, fake_upstream: Any
) -> None:
    run_ids = set(await stream_runs(fake_upstream, 3))
    calls = statements.runs_per_call()
    # Their flush timers fall due at the same moments: once all three stream, each write
    # carries all three (unaligned, nearly every write carried one run).
    assert sum(set(call) == run_ids for call in calls) >= len(calls) / 2, calls
    for run_id in run_ids:
        await assert_logged_whole(run_id)


async def test_an_inline_run_hands_its_first_token_time_and_its_end_to_the_loops_writes(
    statements: Statements, fake_upstream: Any
) -> None:
    run_ids = await stream_runs(fake_upstream, 3)
    # Each run's first token's time went with the loop's writes, once, and before its end,
    # which went with them too.
    carried = [run_id for call in statements.first_tokens for run_id in call]
    assert sorted(carried) == sorted(run_ids)
    assert sorted(run_id for call in statements.ends for run_id in call) == sorted(run_ids)
    for run_id in run_ids:
        first = next(i for i, call in enumerate(statements.first_tokens) if run_id in call)
        end = next(i for i, call in enumerate(statements.ends) if run_id in call)
        assert first < end
        run = await Run.objects.aget(pk=run_id)
        assert run.first_token_at is not None and run.created_at < run.first_token_at
        assert run.finished_at is not None and run.first_token_at < run.finished_at


async def test_runs_ending_while_a_write_is_in_flight_end_in_one_statement(
    statements: Statements,
) -> None:
    await written_during_a_held_write(statements, ended(2))
    assert statements.ends == [[], ["b", "c", "d"]]
    for run_id in ("b", "c", "d"):
        run = await Run.objects.select_related("thread").aget(pk=run_id)
        assert (run.status, run.output_tokens, run.thread.status) == ("succeeded", 2, "idle")
        assert await logged(run_id) == [2]
    a = await Run.objects.select_related("thread").aget(pk="a")
    assert (a.status, a.thread.status) == (RunStatus.RUNNING, ThreadStatus.RUNNING)


async def test_a_mid_run_batch_that_could_not_be_logged_is_kept_and_logged_next(
    statements: Statements, fake_upstream: Any
) -> None:
    statements.refuse_first = True
    (run_id,) = await stream_runs(fake_upstream, 1)
    assert statements.calls and statements.calls[0][0][0] == run_id  # it was refused
    await assert_logged_whole(run_id)  # written later, before the batches after it


async def test_a_first_token_time_that_could_not_be_written_is_kept_and_written_next(
    statements: Statements, fake_upstream: Any
) -> None:
    statements.refuse_first_token = True
    (run_id,) = await stream_runs(fake_upstream, 1)
    # Refused, then kept with its batch and written before the run's next batch.
    assert [call for call in statements.first_tokens if call] == [[run_id], [run_id]]
    await assert_logged_whole(run_id)
    assert (await Run.objects.aget(pk=run_id)).first_token_at is not None


async def test_each_event_loop_has_its_own_writer() -> None:
    assert log_writer_for_loop() is log_writer_for_loop()
    other = await asyncio.to_thread(lambda: asyncio.run(_writer_of_new_loop()))
    assert other is not log_writer_for_loop()


async def _writer_of_new_loop() -> LoopLogWriter:
    return log_writer_for_loop()
