"""One heartbeat statement for all the runs an event loop executes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from conversations.models import Run
from conversations.store import turn_store
from copilot_runtime.runs.heartbeats import heartbeat_for_loop
from tests.conversations.test_services_runs import started_run
from tests.support.waiting import eventually

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fast_heartbeat() -> Any:
    with override_settings(COPILOT_RUNTIME={"HEARTBEAT_SECONDS": 0.05}):
        yield


async def _running_runs(count: int) -> list[str]:
    runs = [await sync_to_async(started_run)() for _ in range(count)]
    await Run.objects.filter(pk__in=[run.pk for run in runs]).aupdate(heartbeat_at=None)
    return [run.pk for run in runs]


async def test_the_runs_of_a_loop_are_renewed_by_one_statement(
    fast_heartbeat: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = turn_store()
    calls: list[list[str]] = []
    real = store.heartbeats

    async def counting(*, run_ids: list[str]) -> set[str]:
        calls.append(sorted(run_ids))
        return await real(run_ids=run_ids)

    monkeypatch.setattr(store, "heartbeats", counting)
    run_ids = await _running_runs(3)
    beat = heartbeat_for_loop()
    for run_id in run_ids:
        beat.register(run_id, lambda: None)

    async def all_beaten() -> bool:
        return await Run.objects.filter(pk__in=run_ids, heartbeat_at=None).acount() == 0

    await eventually(all_beaten, what="a heartbeat of every run")
    for run_id in run_ids:
        beat.unregister(run_id)

    assert calls and all(call == sorted(run_ids) for call in calls)
    assert await Run.objects.filter(pk__in=run_ids, heartbeat_at=None).acount() == 0


async def test_a_stop_requested_in_the_database_reaches_only_its_run(fast_heartbeat: Any) -> None:
    run_ids = await _running_runs(2)
    stopped: list[str] = []
    beat = heartbeat_for_loop()
    for run_id in run_ids:
        beat.register(run_id, lambda run_id=run_id: stopped.append(run_id))

    await Run.objects.filter(pk=run_ids[1]).aupdate(cancel_requested=True)
    # The beat that stops it reads both runs: the other one's stop would have come with it.
    await eventually(lambda: run_ids[1] in stopped, what="the stop of the run asked to stop")
    for run_id in run_ids:
        beat.unregister(run_id)

    assert set(stopped) == {run_ids[1]}


async def test_the_beat_ends_when_no_run_is_left(fast_heartbeat: Any) -> None:
    [run_id] = await _running_runs(1)
    beat = heartbeat_for_loop()
    beat.register(run_id, lambda: None)
    beat.unregister(run_id)

    await asyncio.sleep(0.15)
    renewed = (await Run.objects.aget(pk=run_id)).heartbeat_at

    assert beat._task is None
    assert renewed is None
