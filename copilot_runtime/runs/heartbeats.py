"""One heartbeat for all the runs a process executes on an event loop.

Each executing run must renew ``Run.heartbeat_at`` every ``HEARTBEAT_SECONDS`` (the reaper fails
runs whose heartbeat is stale) and learn when a stop was requested in the database. A statement
per run every two seconds is 500 statements a second for 1,000 streams; instead one task per
event loop renews all of them in one statement and stops the runs whose stop was requested.

    beat = heartbeat_for_loop()
    beat.register(run_id, on_stop)    # while the run executes
    beat.unregister(run_id)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from conversations.store import turn_store
from conversations.store.grouped import PerLoop
from copilot_runtime.conf import runtime_setting

logger = logging.getLogger(__name__)


class LoopHeartbeat:
    """The runs executing on one event loop, and the task that renews their heartbeats."""

    def __init__(self) -> None:
        self._runs: dict[str, Callable[[], None]] = {}
        self._task: asyncio.Task[None] | None = None

    def register(self, run_id: str, on_stop: Callable[[], None]) -> None:
        self._runs[run_id] = on_stop
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._beat())

    def unregister(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    async def _beat(self) -> None:
        interval = float(runtime_setting("HEARTBEAT_SECONDS"))
        while self._runs:
            await asyncio.sleep(interval)
            run_ids = list(self._runs)
            if not run_ids:
                break
            try:
                stopped = await turn_store().heartbeats(run_ids=run_ids)
            except Exception:  # a database hiccup must not end the beat (or the runs)
                logger.warning("renewing %d heartbeats failed", len(run_ids), exc_info=True)
                continue
            for run_id in stopped:
                on_stop = self._runs.get(run_id)
                if on_stop is not None:
                    on_stop()
        self._task = None


_beats: PerLoop[LoopHeartbeat] = PerLoop(LoopHeartbeat)


def heartbeat_for_loop() -> LoopHeartbeat:
    """The heartbeat of the running event loop (created on first use)."""
    return _beats.get()
