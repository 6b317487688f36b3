"""Listening to one group of the channel layer: join it, receive its messages, leave it.

Channels' way is a channel of one's own (``new_channel``) added to the group. On channels_redis's
pub/sub layer, with its lane open, the channel is a queue of this process only and the group the
one subscription, which leaving gives back (copilot_runtime/fastlane/channels_redis.py says
why). Any other layer is used through its public API.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

from copilot_runtime.fastlane.channels_redis import OwnQueue, own_queue


class GroupListener:
    """Member of one group until ``leave``; ``receive`` may be cancelled (a timeout) and called
    again without losing the membership or a message."""

    def __init__(self, layer: Any, group: str, channel: str, own: OwnQueue | None):
        self._layer = layer
        self._group = group
        self.channel = channel
        self._own = own  # the pub/sub layer's queue of this channel, else None
        self._left = False
        # The layer's own receive, kept across the cancellations of ``receive``: a cancelled
        # receive on channels_redis's pub/sub layer drops the channel and its membership.
        self._receiving: asyncio.Future[dict[str, Any]] | None = None

    @property
    def left(self) -> bool:
        return self._left

    @classmethod
    async def join(cls, layer: Any, group: str) -> GroupListener:
        """In the group once this returns: on the lists and in-memory layers at once; on
        the pub/sub layer the subscription has been written to Redis, which reads it no
        later than what this process sends afterwards (a run's task): a message published in
        answer to that reaches ``receive``. Raises what the layer raised."""
        own = own_queue(layer)
        if own is None:
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
            return cls(layer, group, channel, None)
        await own.join(group)
        return cls(layer, group, own.channel, own)

    async def receive(self) -> dict[str, Any]:
        if self._own is not None:
            message: dict[str, Any] = self._layer.deserialize(await self._own.queue.get())
            return message
        if self._receiving is None:
            self._receiving = asyncio.ensure_future(self._layer.receive(self.channel))
        received = await asyncio.shield(self._receiving)
        self._receiving = None
        return received

    async def leave(self) -> None:
        """Out of the group, the channel given back. Best effort: a layer that fails here
        (Redis gone) has nothing left to deliver.

        A leaver cancelled meanwhile does not cut the leaving short: a run's follower is
        stopped as soon as its answer ends, often while it is leaving, and an interrupted
        ``UNSUBSCRIBE`` kept the group subscribed in Redis and in this process, for good (most
        followed runs of a busy celery-shape web process)."""
        if self._left:
            return
        self._left = True
        leaving = asyncio.ensure_future(self._discard())
        _LEAVING.add(leaving)
        leaving.add_done_callback(_LEAVING.discard)
        await asyncio.shield(leaving)

    async def _discard(self) -> None:
        try:
            await self._layer.group_discard(self._group, self.channel)
        finally:
            if self._own is not None:
                self._own.forget()
            if self._receiving is not None:
                # Cancelled, the layer's receive gives its channel back (pub/sub: unsubscribes).
                self._receiving.cancel()
                with contextlib.suppress(BaseException):
                    await self._receiving
                self._receiving = None


# Leavings under way, held until done: the loop keeps only weak references to its tasks.
_LEAVING: set[asyncio.Future[None]] = set()


class Leaving(Protocol):
    async def leave(self) -> None: ...


async def leave_quietly(listener: Leaving) -> None:
    with contextlib.suppress(Exception):
        await listener.leave()
