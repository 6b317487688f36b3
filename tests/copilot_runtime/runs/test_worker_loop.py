"""A worker process's run loop: one uvloop for every run the process executes, whichever
thread hands a run over, waited for before the process exits."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from copilot_runtime.runs import worker_loop as run_loop
from tests.support.generate_e2e import wait_for

HANDOVER_TIMEOUT = 10.0
SETTLE_SECONDS = 0.2


def test_runs_handed_over_by_several_task_threads_interleave_on_one_loop() -> None:
    # Each run waits for the other's signal: they finish only if both are in progress at once.
    signals: dict[str, asyncio.Event] = {}
    ran_on: dict[str, str] = {}

    async def run(name: str, other: str) -> str:
        ran_on[name] = threading.current_thread().name
        signals.setdefault(name, asyncio.Event()).set()
        await signals.setdefault(other, asyncio.Event()).wait()
        return name

    results: dict[str, str] = {}

    def task(name: str, other: str) -> None:
        results[name] = run_loop.run_on_process_loop(run(name, other))

    threads = [
        threading.Thread(target=task, args=("a", "b")),
        threading.Thread(target=task, args=("b", "a")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANDOVER_TIMEOUT)

    assert results == {"a": "a", "b": "b"}
    assert ran_on == {"a": "copilot-runs", "b": "copilot-runs"}


def test_the_runs_loop_is_uvloops_where_it_is_installed() -> None:
    import uvloop

    loop = run_loop.process_loop()
    assert isinstance(loop, uvloop.Loop)
    assert loop.is_running()


def test_without_uvloop_the_runs_loop_is_asyncios(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvloop

    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed: the import fails
    loop = run_loop.new_loop()
    try:
        assert isinstance(loop, asyncio.BaseEventLoop)
        assert not isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_an_exiting_process_waits_for_the_work_it_started_before_closing_the_loop() -> None:
    ended: list[str] = []

    async def work() -> None:
        await asyncio.sleep(SETTLE_SECONDS)
        ended.append("work")

    loop = run_loop.process_loop()
    run_loop.start_on_process_loop(work())

    run_loop.close_process_loop()

    assert ended == ["work"]
    wait_for(lambda: not loop.is_running(), timeout=HANDOVER_TIMEOUT, what="the loop to stop")
    loop.close()
    assert run_loop.process_loop() is not loop  # a later use starts a new one
