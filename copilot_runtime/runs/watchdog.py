"""What watches a run while it executes: its heartbeat, a stop requested for it, and its time
limit."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from copilot_runtime.runs.heartbeats import heartbeat_for_loop
from copilot_runtime.runs.stops import stops_for_loop


class OverLimit:
    """Called when a run's time is up: stops its turn, and remembers it did."""

    def __init__(self, turn_task: asyncio.Task[Any]) -> None:
        self._turn_task = turn_task
        self.hit = False

    def __call__(self) -> None:
        if not self._turn_task.done():
            self.hit = True
            self._turn_task.cancel()


def cancelling_this_task() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class Watchdog:
    """While a run executes: renew its heartbeat, and stop it when a stop is requested
    (told at once on the layer, and checked in the database with each heartbeat)."""

    def __init__(self, run_id: str, target: asyncio.Task[Any], *, in_process: bool) -> None:
        self._run_id = run_id
        self._target = target
        self._in_process = in_process
        self._listening = False
        self._started = False
        self._stopped = False

    def start(self) -> None:
        if self._started or self._stopped:
            return  # a claim that committed after the run had ended: nothing left to watch
        self._started = True
        # The heartbeat is renewed with every other run of this loop's (one statement).
        heartbeat_for_loop().register(self._run_id, self._stop_target)
        # A run executing where it is streamed (inline) is stopped through this process's live
        # registry; an in-memory layer reaches no other process, so listening on it would only
        # cost a task.
        self._listening = not (
            self._in_process and isinstance(get_channel_layer(), InMemoryChannelLayer)
        )
        if self._listening:
            stops_for_loop().register(self._run_id, self._stop_target)

    def _stop_target(self) -> None:
        if not self._target.done():
            self._target.cancel()

    async def stop(self) -> None:
        """Stop watching."""
        self._stopped = True
        if not self._started:
            return
        heartbeat_for_loop().unregister(self._run_id)
        if self._listening:
            stops_for_loop().unregister(self._run_id)


def watch_if_claimed(claim: asyncio.Future[None], watchdog: Watchdog) -> None:
    if not claim.cancelled() and claim.exception() is None:
        watchdog.start()


def stop_if_unstored(stored: asyncio.Future[None], turn_task: asyncio.Task[Any]) -> None:
    if stored.cancelled() or stored.exception() is not None:
        turn_task.cancel()
