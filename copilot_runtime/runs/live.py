"""In-process fan-out of a running turn's events to the requests that watch it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from copilot_runtime.events import Event
from copilot_runtime.runs.inbox import Inbox


@dataclass
class LiveRun:
    """A run executing in this process: its task and the inboxes of its watchers."""

    run_id: str
    task: asyncio.Task[None] | None = None
    watchers: list[Inbox[Event | None]] = field(default_factory=list)
    finished: bool = False

    def watch(self) -> Inbox[Event | None]:
        """An inbox receiving every event from now on, then ``None`` when the run ends."""
        inbox: Inbox[Event | None] = Inbox()
        if self.finished:
            inbox.put_nowait(None)
        else:
            self.watchers.append(inbox)
        return inbox

    def unwatch(self, inbox: Inbox[Event | None]) -> None:
        if inbox in self.watchers:
            self.watchers.remove(inbox)

    def publish(self, event: Event) -> None:
        for inbox in self.watchers:
            inbox.put_nowait(event)

    def close(self) -> None:
        self.finished = True
        for inbox in self.watchers:
            inbox.put_nowait(None)

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
