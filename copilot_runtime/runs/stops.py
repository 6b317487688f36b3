"""Stops told on the channel layer: one group for every process that executes runs.

A run may be stopped from anywhere: a client that leaves, the v2 stop endpoint, the admin. The
process executing it hears of it at once on the channel layer, and within a heartbeat from the
database in any case (``cancel_requested``, checked by heartbeats.py), so a stop the layer
loses still stops the run.

Each executing run used to listen on a group of its own: on the Redis pub/sub layer a task, a
subscription and an unsubscription per run, on a Celery worker's busiest path. Stops are rare,
so they go to one group, naming their run, and each event loop executing runs listens to that
group once, for as long as it has runs: a worker under load subscribes once, not once a run.
Every process executing runs receives every stop and ignores those of runs it does not have.

A process of an earlier version listens on the run's own group, which stops are no longer sent
to: during a rolling upgrade its runs stop on the database's flag, within a heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from channels.layers import get_channel_layer

from conversations.store.grouped import PerLoop
from copilot_runtime.runs.layer_groups import GroupListener, leave_quietly

logger = logging.getLogger(__name__)

STOP_GROUP = "runs.stop"
STOP_MESSAGE = "run.cancel"
# After the layer failed (Redis restarting): how long before listening again. Meanwhile
# stops arrive through the heartbeat's database check.
RETRY_SECONDS = 1.0


async def announce_stop(run_id: str) -> None:
    """Tell the process executing ``run_id`` to stop it. Best effort: the run's stop is also
    recorded in the database, which that process checks with every heartbeat."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(STOP_GROUP, {"type": STOP_MESSAGE, "run_id": run_id})
    except Exception:
        logger.warning("could not announce the stop of run %s", run_id, exc_info=True)


class LoopStops:
    """The runs executing on one event loop that a stop told on the layer must reach, and the
    one task listening for them while there are any."""

    def __init__(self) -> None:
        self._runs: dict[str, Callable[[], None]] = {}
        self._task: asyncio.Task[None] | None = None

    def register(self, run_id: str, on_stop: Callable[[], None]) -> None:
        """Call ``on_stop`` when a stop of ``run_id`` is told, until ``unregister``."""
        self._runs[run_id] = on_stop
        if self._task is None or self._task.done():
            layer = get_channel_layer()
            if layer is not None:
                self._task = asyncio.get_running_loop().create_task(self._listen(layer))

    def unregister(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
        if not self._runs and self._task is not None:
            # Not awaited: the run's end does not wait for the group to be left.
            self._task.cancel()
            self._task = None

    @property
    def listening(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _listen(self, layer: Any) -> None:
        while True:
            try:
                listener = await GroupListener.join(layer, STOP_GROUP)
            except Exception:
                logger.warning("cannot listen for stops on the channel layer", exc_info=True)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            try:
                while True:
                    message = await listener.receive()
                    if message.get("type") != STOP_MESSAGE:
                        continue
                    on_stop = self._runs.get(message.get("run_id", ""))
                    if on_stop is not None:
                        on_stop()
            except Exception:
                logger.warning("listening for stops failed; listening again", exc_info=True)
            finally:
                await leave_quietly(listener)
            await asyncio.sleep(RETRY_SECONDS)


_stops: PerLoop[LoopStops] = PerLoop(LoopStops)


def stops_for_loop() -> LoopStops:
    """The stop listener of the running event loop (created on first use)."""
    return _stops.get()
