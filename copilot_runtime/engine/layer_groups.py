"""Listening to one group of the channel layer: join it, receive its messages, leave it.

Channels' way is a channel of one's own (``new_channel``) added to the group. On channels_redis's
pub/sub layer that channel is a Redis subscription and a queue of its own, which the layer
gives back only when a ``receive`` on it is cancelled: a run's follower that ended on its last
message kept both for the life of the process (one per followed run, a leak the celery shape's
web process paid at every turn), and each ``receive`` that timed out unsubscribed the channel
and subscribed it again. On that layer, here, the channel is a queue in this process only: the
group is the one subscription, and leaving gives back both. Any other layer is used through
its public API.

Like copilot_runtime/engine/layer_publish.py this reaches into channels_redis 4.x (pinned in
requirements.lock); tests/copilot_runtime/engine/test_layer_groups.py holds it to the real layer
on a real Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
import weakref
from typing import Any, Protocol


def _pubsub_loop_layer(layer: Any) -> Any | None:
    """The pub/sub layer's part for the running loop, or None on any other layer."""
    # Never imported here: a process on another layer does not load redis-py (~15 MiB).
    pubsub = sys.modules.get("channels_redis.pubsub")
    if pubsub is None or not isinstance(layer, pubsub.RedisPubSubChannelLayer):
        return None
    return layer._get_layer()


class GroupListener:
    """Member of one group until ``leave``; ``receive`` may be cancelled (a timeout) and called
    again without losing the membership or a message."""

    def __init__(self, layer: Any, group: str, channel: str, queue: asyncio.Queue[Any] | None):
        self._layer = layer
        self._group = group
        self.channel = channel
        self._queue = queue  # the pub/sub layer's queue of this channel, else None
        self._left = False

    @property
    def left(self) -> bool:
        return self._left

    @classmethod
    async def join(cls, layer: Any, group: str) -> GroupListener:
        """In the group once this returns: on the lists and in-memory layers at once; on
        the pub/sub layer the subscription has been written to Redis, which reads it no
        later than what this process sends afterwards (a run's task): a message published in
        answer to that reaches ``receive``. Raises what the layer raised."""
        loop_layer = _pubsub_loop_layer(layer)
        if loop_layer is None:
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
            return cls(layer, group, channel, None)
        await _keep_receivers_awake(loop_layer)
        channel = f"{loop_layer.prefix}specific.{uuid.uuid4().hex}"
        queue: asyncio.Queue[Any] = asyncio.Queue()
        loop_layer.channels[channel] = queue
        try:
            await loop_layer.group_add(group, channel)
        except BaseException:
            loop_layer.channels.pop(channel, None)
            raise
        return cls(layer, group, channel, queue)

    async def receive(self) -> dict[str, Any]:
        message: dict[str, Any]
        if self._queue is None:
            message = await self._layer.receive(self.channel)
        else:
            message = self._layer.deserialize(await self._queue.get())
        return message

    async def leave(self) -> None:
        """Out of the group, the channel given back. Best effort: a layer that fails here
        (Redis gone) has nothing left to deliver.

        A leaver cancelled meanwhile does not cut the leaving short: a run's follower is
        stopped as soon as its answer ends, often while it is leaving, and an interrupted
        ``UNSUBSCRIBE`` kept the group subscribed in Redis and in this process, for good (nine in
        ten followed runs of a celery-shape web process at 50 users, benchmarks/README.md)."""
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
            loop_layer = _pubsub_loop_layer(self._layer) if self._queue is not None else None
            if loop_layer is not None:
                loop_layer.channels.pop(self.channel, None)


# A channel no one publishes to, subscribed once per connection of a loop's pub/sub layer and
# never left. channels_redis's reader waits for messages while its connection has a
# subscription, and sleeps 100 ms at a time while it has none: a follower that joined during
# that sleep got its run's first batch up to 100 ms late. Once every follower left (one user
# between two turns), that was every turn: TTFT p50 about 101 ms through the celery shape at
# one user on the twenty-fourth session's host (benchmarks/README.md).
_AWAKE_CHANNEL = "awake"
_AWAKE: weakref.WeakSet[Any] = weakref.WeakSet()  # the loop layers whose connections hold it


def awake_channel(loop_layer: Any) -> str:
    return f"{loop_layer.prefix}__{_AWAKE_CHANNEL}"


async def _keep_receivers_awake(loop_layer: Any) -> None:
    if loop_layer in _AWAKE:
        return
    for shard in loop_layer._shards:
        await shard.subscribe(awake_channel(loop_layer))
    _AWAKE.add(loop_layer)


# Leavings under way, held until done: the loop keeps only weak references to its tasks.
_LEAVING: set[asyncio.Future[None]] = set()


class Leaving(Protocol):
    async def leave(self) -> None: ...


async def leave_quietly(listener: Leaving) -> None:
    with contextlib.suppress(Exception):
        await listener.leave()
