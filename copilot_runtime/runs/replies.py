"""Answers to the process that queued a run: one group per event loop, not one per run.

A web process that queues a run on a Celery worker follows it to its end. It used to join the
run's own group for that: on the Redis pub/sub layer a ``SUBSCRIBE`` before the run was queued
and an ``UNSUBSCRIBE`` after it, CPU on the web and two commands for Redis, every turn. Instead
each event loop
joins a group of its own once (``LoopReplies``), the run's task names it (``reply_to`` in the
placement), and the worker announces the run's batches there too, each naming its run
(``announcements``); the loop hands each batch to its run's follower (``ReplySlot``).

Everyone else who follows a run (a websocket subscription, a v2 reconnect, another web
process) joins the run's own group, which the worker announces to as before. What the layer
loses on the way, the follower reads from the log, as it does on the run's group: it sees a
gap in the sequence, or nothing for a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import Iterator
from typing import Any

from channels.layers import get_channel_layer

from conversations.store.grouped import PerLoop
from copilot_runtime.runs.layer_groups import GroupListener, leave_quietly

logger = logging.getLogger(__name__)

_REPLY_GROUP = re.compile(r"replies\.[0-9a-f]{32}")


class ReplySlot:
    """One followed run's share of its loop's reply group: what ``follow_run`` receives from,
    as from a ``GroupListener`` of the run's own group."""

    def __init__(self, replies: LoopReplies, run_id: str) -> None:
        self._replies = replies
        self._run_id = run_id
        self._queue: asyncio.Queue[dict[str, Any] | Exception] = asyncio.Queue()
        self._left = False

    @property
    def group(self) -> str:
        return self._replies.group

    @property
    def left(self) -> bool:
        return self._left

    async def receive(self) -> dict[str, Any]:
        """The run's next batch message; raises what failed the reply group."""
        item = await self._queue.get()
        if isinstance(item, Exception):
            raise item
        return item

    async def leave(self) -> None:
        if not self._left:
            self._left = True
            self._replies.forget(self._run_id, self)

    def deliver(self, item: dict[str, Any] | Exception) -> None:
        self._queue.put_nowait(item)


class LoopReplies:
    """The reply group of one event loop, joined on first use and kept; its messages go to the
    slot of the run they name (those of runs no one follows any more are dropped)."""

    def __init__(self) -> None:
        self.group = f"replies.{uuid.uuid4().hex}"
        self._slots: dict[str, ReplySlot] = {}
        self._task: asyncio.Task[None] | None = None
        self._layer: Any = None  # the layer it listens on
        self._joining = asyncio.Lock()

    async def register(self, run_id: str) -> ReplySlot | None:
        """A slot receiving what the run's executor announces to this group from now on;
        None when there is no layer or joining it failed (follow the run's own group then)."""
        if not await self._listening():
            return None
        slot = ReplySlot(self, run_id)
        self._slots[run_id] = slot
        return slot

    def forget(self, run_id: str, slot: ReplySlot) -> None:
        if self._slots.get(run_id) is slot:
            del self._slots[run_id]

    def following(self, run_id: str) -> bool:
        return run_id in self._slots

    @property
    def listening(self) -> bool:
        return self._task is not None and not self._task.done()

    async def close(self) -> None:
        """Leave the group (its followers' next ``receive`` waits for nothing more)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _listening(self) -> bool:
        layer = get_channel_layer()
        if layer is None:
            return False
        if self.listening and layer is self._layer:
            return True
        async with self._joining:
            if self.listening and layer is self._layer:
                return True
            if self._task is not None:
                # The layer was replaced (settings changed): listen on the current one.
                self._task.cancel()
            try:
                listener = await GroupListener.join(layer, self.group)
            except Exception:
                logger.warning("cannot join this process's reply group", exc_info=True)
                return False
            self._layer = layer
            self._task = asyncio.get_running_loop().create_task(
                self._dispatch(listener), name=f"replies:{self.group}"
            )
            return True

    async def _dispatch(self, listener: GroupListener) -> None:
        try:
            while True:
                message = await listener.receive()
                slot = self._slots.get(message.get("run_id", ""))
                if slot is not None:
                    slot.deliver(message)
        except Exception as exc:
            # Every follower goes on from the log; the next run joins the group again.
            logger.warning("the reply group failed; its runs are followed from the log")
            for slot in list(self._slots.values()):
                slot.deliver(exc)
        finally:
            await leave_quietly(listener)


_replies: PerLoop[LoopReplies] = PerLoop(LoopReplies)


def replies_for_loop() -> LoopReplies:
    """The reply group of the running event loop (created on first use)."""
    return _replies.get()


# The executing side: the reply groups of each run this process executes for a follower
# elsewhere, named by the run's tasks (a task delivered twice may execute beside the first
# while its claim fails: its end must not take the first's group away).
_REPLY_TO: dict[str, list[str]] = {}


def reply_group(value: Any) -> str | None:
    """``value`` if it names a reply group (what a task's ``reply_to`` carries), else None."""
    return value if isinstance(value, str) and _REPLY_GROUP.fullmatch(value) else None


@contextlib.contextmanager
def replying_to(run_id: str, group: str | None) -> Iterator[None]:
    """While the run executes, its announcements also go to ``group`` (None: nowhere more)."""
    if group is None:
        yield
        return
    groups = _REPLY_TO.setdefault(run_id, [])
    groups.append(group)
    try:
        yield
    finally:
        groups.remove(group)
        if not groups:
            del _REPLY_TO[run_id]


def announcements(
    run_id: str, group: str, message: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """Where a batch ``message`` of ``run_id`` goes: the run's ``group``, and the reply group
    its task named, naming the run there."""
    groups = _REPLY_TO.get(run_id)
    if not groups:
        return [(group, message)]
    return [(group, message), (groups[0], {**message, "run_id": run_id})]
