"""A run's flusher (runs/flusher.py): its batches and its end, in order.

The run's end events and its status go out in one write: a follower told the run has finished
may send its follow-up at once, and must not find the thread busy.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from conversations.models import RunStatus
from conversations.services.runs import RunOutcome, Usage
from conversations.store.types import PreparedTurn, Progress
from copilot_runtime.events import RunFinished, TextDelta, TextStart
from copilot_runtime.runs import flusher as flushing
from copilot_runtime.runs.recorder import RunRecorder


class Writes:
    """Each write handed to the loop's log writer: its event types, and whether it ends the run."""

    def __init__(self) -> None:
        self.writes: list[tuple[list[str], bool]] = []

    async def write(
        self, *, run_id: str, thread_pk: int | None, progress: Progress, told: int = 0
    ) -> None:
        self.writes.append(
            ([event.type for event in progress.events], progress.outcome is not None)
        )


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Writes:
    seen = Writes()
    monkeypatch.setattr(flushing, "log_writer_for_loop", lambda: seen)
    return seen


async def test_a_run_ending_while_a_flush_waits_for_its_turns_write_ends_in_one_write(
    writes: Writes,
) -> None:
    # An inline run starts while its turn's write is in flight; a flush falls due and waits
    # for that write; the run ends meanwhile. Taken after the wait, that flush's batch held
    # run_finished without the run's status.
    stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    prepared = PreparedTurn(run_id="r", thread_id="t", thread_pk=1, next_position=0, stored=stored)
    recorder = RunRecorder(run_id="r", thread_id="t", agent_name="default")
    flusher = flushing.Flusher(recorder, 0.001, prepared, first_token_at_once=False)
    recorder.observe(TextStart(message_id="m"))
    recorder.observe(TextDelta(message_id="m", delta="Hi"))
    flusher.poke()
    await asyncio.sleep(0.02)  # the flush fell due, and waits for the turn's write

    recorder.observe(RunFinished(status="succeeded"))
    closing = asyncio.create_task(
        flusher.close(RunOutcome(status=RunStatus.SUCCEEDED, usage=Usage()))
    )
    await asyncio.sleep(0)
    stored.set_result(None)  # the turn's write commits
    await closing

    assert [ends for types, ends in writes.writes if "run_finished" in types] == [True]
    logged: list[Any] = [t for types, _ in writes.writes for t in types]
    assert logged == ["text_start", "text_delta", "run_finished"]


def _streaming(interval: float) -> tuple[flushing.Flusher, RunRecorder]:
    """An inline run's flusher, poked once its run has started a text message."""
    prepared = PreparedTurn(run_id="r", thread_id="t", thread_pk=1, next_position=0)
    recorder = RunRecorder(run_id="r", thread_id="t", agent_name="default")
    flusher = flushing.Flusher(recorder, interval, prepared, first_token_at_once=False)
    recorder.observe(TextStart(message_id="m"))
    recorder.observe(TextDelta(message_id="m", delta="Hi"))
    flusher.poke()
    return flusher, recorder


async def test_a_run_ending_before_the_grids_first_point_writes_once_without_a_writing_task(
    writes: Writes,
) -> None:
    flusher, recorder = _streaming(60.0)
    await asyncio.sleep(0)
    recorder.observe(RunFinished(status="succeeded"))
    flusher.poke()
    await flusher.close(RunOutcome(status=RunStatus.SUCCEEDED, usage=Usage()))

    assert flusher._task is None
    assert writes.writes == [(["text_start", "text_delta", "run_finished"], True)]


async def test_a_run_still_streaming_at_the_grids_point_writes_its_batch_then(
    writes: Writes,
) -> None:
    flusher, recorder = _streaming(0.01)
    assert writes.writes == []  # not at once: at the grid's next point
    for _ in range(200):
        if writes.writes:
            break
        await asyncio.sleep(0.005)
    assert writes.writes == [(["text_start", "text_delta"], False)]

    recorder.observe(TextDelta(message_id="m", delta=" there"))
    recorder.observe(RunFinished(status="succeeded"))
    flusher.poke()
    await flusher.close(RunOutcome(status=RunStatus.SUCCEEDED, usage=Usage()))
    assert writes.writes[1:] == [(["text_delta", "run_finished"], True)]


class RefusingStore:
    """The turn store's ``record``: refuses the first ``refusals`` calls, keeps the rest."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.recorded: list[list[str]] = []

    async def record(self, *, run_id: str, thread_pk: int | None, progress: Progress) -> None:
        if self.refusals:
            self.refusals -= 1
            raise RuntimeError("the database hiccuped")
        self.recorded.append([event.type for event in progress.events])


class RefusingWrites(Writes):
    """The loop's log writer, refusing its first write."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = False

    async def write(
        self, *, run_id: str, thread_pk: int | None, progress: Progress, told: int = 0
    ) -> None:
        if not self.refused:
            self.refused = True
            raise RuntimeError("the database hiccuped")
        await super().write(run_id=run_id, thread_pk=thread_pk, progress=progress, told=told)


async def test_a_batch_whose_earlier_batch_fails_again_is_kept_and_written_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A relayed run: its first token told at once; the grid's write carrying it refused; at
    # the next write, that batch refused again. The batch taken meanwhile waits behind it, and
    # the log ends whole, in order, each event once.
    writes = RefusingWrites()
    store = RefusingStore(refusals=1)
    announced: list[list[str]] = []

    async def announcing(run_id: str, events: Any) -> None:
        announced.append([event.type for event in events])

    monkeypatch.setattr(flushing, "log_writer_for_loop", lambda: writes)
    monkeypatch.setattr(flushing, "turn_store", lambda: store)
    monkeypatch.setattr(flushing, "announce_batch", announcing)
    prepared = PreparedTurn(run_id="r", thread_id="t", thread_pk=1, next_position=0)
    recorder = RunRecorder(run_id="r", thread_id="t", agent_name="default")
    flusher = flushing.Flusher(recorder, 0.01, prepared, first_token_at_once=True)

    recorder.observe(TextStart(message_id="m"))
    recorder.observe(TextDelta(message_id="m", delta="Hi"))
    flusher.poke()
    for delta in (" there", " and", " again"):
        await asyncio.sleep(0.03)  # past a point of the grid: a write (refused, then retried)
        recorder.observe(TextDelta(message_id="m", delta=delta))
        flusher.poke()
    await asyncio.sleep(0.03)
    recorder.observe(RunFinished(status="succeeded"))
    await flusher.close(RunOutcome(status=RunStatus.SUCCEEDED, usage=Usage()))

    assert writes.refused and store.refusals == 0  # both refusals happened
    logged = [t for batch in store.recorded for t in batch]
    logged += [t for types, _ in writes.writes for t in types]
    expected = ["text_start", "text_delta", "text_delta", "text_delta", "text_delta"]
    assert logged == [*expected, "run_finished"]
    assert announced[0] == ["text_start", "text_delta"]  # told at once
