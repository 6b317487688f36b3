"""In-process fan-out of a running turn's events to the requests that watch it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from copilot_runtime.events import Event


@dataclass
class LiveRun:
    """A run executing in this process: its task and the queues of its watchers."""

    run_id: str
    task: asyncio.Task[None] | None = None
    watchers: list[asyncio.Queue[Event | None]] = field(default_factory=list)
    finished: bool = False

    def watch(self) -> asyncio.Queue[Event | None]:
        """A queue receiving every event from now on, then ``None`` when the run ends."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        if self.finished:
            queue.put_nowait(None)
        else:
            self.watchers.append(queue)
        return queue

    def unwatch(self, queue: asyncio.Queue[Event | None]) -> None:
        if queue in self.watchers:
            self.watchers.remove(queue)

    def publish(self, event: Event) -> None:
        for queue in self.watchers:
            queue.put_nowait(event)

    def close(self) -> None:
        self.finished = True
        for queue in self.watchers:
            queue.put_nowait(None)

    def cancel(self) -> bool:
        if self.task is None or self.task.done():
            return False
        self.task.cancel()
        return True


_LIVE_RUNS: dict[str, LiveRun] = {}


def live_run_register(run_id: str) -> LiveRun:
    live = LiveRun(run_id=run_id)
    _LIVE_RUNS[run_id] = live
    return live


def live_run_get(run_id: str) -> LiveRun | None:
    return _LIVE_RUNS.get(run_id)


def live_run_forget(run_id: str) -> None:
    _LIVE_RUNS.pop(run_id, None)
