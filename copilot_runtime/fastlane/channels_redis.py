"""The channels_redis lane: the pub/sub layer's shards, used directly.

channels_redis's ``RedisPubSubChannelLayer`` (4.x) keeps, per event loop, a layer of shards,
each a Redis client with a lock that orders its publishes and subscriptions. Three uses of that
inside, each with the layer's public API as its fallback:

- **Many group messages in one round trip** (``publish_many``). ``group_send`` publishes one
  message per call under the shard's lock: the batches of many runs flushed at the same
  moment queued behind each other's round trips on the worker's one event loop. Here the
  messages of one moment go to each shard as one pipeline of
  ``PUBLISH`` commands, under the same lock, serialized by the layer itself: followers receive
  exactly what ``group_send`` would have published.
- **A run's claim on the shard's Redis** (``set_if_absent``, ``eval_with_groups``):
  engine/claims.py says why; without the lane the claim is taken in the database.
- **A group's listener as a queue of this process** (``own_queue``). Channels' way is
  a channel of one's own (``new_channel``) added to the group; on this layer that channel is a
  Redis subscription and a queue, given back only when a ``receive`` on it is cancelled: a run's
  follower that ended on its last message kept both for the life of the process. Here the group
  is the one subscription, and leaving gives back both (engine/layer_groups.py).

tests/copilot_runtime/runs/test_layer_publish.py, test_layer_groups.py and test_claims.py hold
each to the real layer on a real Redis, with the lane open and closed.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
import weakref
from collections.abc import Sequence
from typing import Any

from copilot_runtime.fastlane import lane_open


def is_redis_pubsub(layer: Any) -> bool:
    # Never imported here: a process on another layer does not load redis-py.
    pubsub = sys.modules.get("channels_redis.pubsub")
    return pubsub is not None and isinstance(layer, pubsub.RedisPubSubChannelLayer)


def lane_for(layer: Any) -> bool:
    """Whether ``layer`` is the pub/sub layer and its lane is open."""
    return is_redis_pubsub(layer) and lane_open("channels-redis")


async def publish_many(layer: Any, messages: Sequence[tuple[str, dict[str, Any]]]) -> bool:
    """Publish each (group, message) as ``group_send`` would, one pipeline per shard. False,
    with nothing sent, where the lane does not serve ``layer``."""
    if not lane_for(layer):
        return False
    loop_layer = layer._get_layer()
    by_shard: dict[Any, list[tuple[str, bytes]]] = {}
    for group, message in messages:
        channel = loop_layer._get_group_channel_name(group)
        shard = loop_layer._get_shard(channel)
        by_shard.setdefault(shard, []).append((channel, layer.serialize(message)))
    for shard, published in by_shard.items():
        async with shard._lock:
            shard._ensure_redis()
            pipe = shard._redis.pipeline(transaction=False)
            for channel, data in published:
                pipe.publish(channel, data)
            await pipe.execute()
    return True


async def set_if_absent(layer: Any, key: str, *, ttl: int) -> bool | None:
    """``SET key 1 NX EX ttl`` on the shard ``key`` falls on: whether it was set, or None where
    the lane does not serve ``layer``. Raises what Redis raised."""
    if not lane_for(layer):
        return None
    shard = layer._get_layer()._get_shard(key)
    # Not under the shard's lock, which orders the layer's publishes and subscriptions: the
    # claim would wait behind the announcements of every other run (measured: the first
    # tokens at 50 users then came after the runs' ends). The shard's client draws a
    # connection of its own from its pool.
    shard._ensure_redis()
    return bool(await shard._redis.set(key, b"1", nx=True, ex=ttl))


async def eval_with_groups(
    layer: Any,
    script: str,
    key: str,
    args: Sequence[Any],
    messages: Sequence[tuple[str, dict[str, Any]]],
) -> Any:
    """``EVAL script 1 key *args *[channel, data for each (group, message)]`` on the shard of
    ``key``, the messages serialized as ``group_send`` would publish them. ``NotImplemented``
    where the lane does not serve ``layer`` or a group lives on another shard than ``key``."""
    if not lane_for(layer):
        return NotImplemented
    from copilot_runtime.fastlane.redis import command_at_once

    loop_layer = layer._get_layer()
    shard = loop_layer._get_shard(key)
    published: list[Any] = []
    for group, message in messages:
        channel = loop_layer._get_group_channel_name(group)
        if loop_layer._get_shard(channel) is not shard:
            return NotImplemented
        published += [channel, layer.serialize(message)]
    shard._ensure_redis()
    # Written at once (fastlane/redis.py): the run's turn goes on parsing its reply.
    return await command_at_once(shard._redis, "EVAL", script, 1, key, *args, *published)


class OwnQueue:
    """A group's listener on the pub/sub layer: a queue in this process, in the group."""

    def __init__(self, loop_layer: Any, channel: str) -> None:
        self._loop_layer = loop_layer
        self.channel = channel
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    async def join(self, group: str) -> None:
        await _keep_receivers_awake(self._loop_layer)
        self._loop_layer.channels[self.channel] = self.queue
        try:
            await self._loop_layer.group_add(group, self.channel)
        except BaseException:
            self.forget()
            raise

    def forget(self) -> None:
        """The queue given back (after the layer's ``group_discard``)."""
        self._loop_layer.channels.pop(self.channel, None)


def own_queue(layer: Any) -> OwnQueue | None:
    """A new listener's queue on ``layer``, or None where the lane does not serve it (then:
    ``new_channel`` and ``group_add``)."""
    if not lane_for(layer):
        return None
    loop_layer = layer._get_layer()
    return OwnQueue(loop_layer, f"{loop_layer.prefix}specific.{uuid.uuid4().hex}")


# A channel no one publishes to, subscribed once per connection of a loop's pub/sub layer and
# never left. channels_redis's reader waits for messages while its connection has a
# subscription, and sleeps 100 ms at a time while it has none: a follower that joined during
# that sleep got its run's first batch up to 100 ms late. Once every follower left (one user
# between two turns), that was every turn: the first token of each came that much later.
_AWAKE_CHANNEL = "awake"
_AWAKE: weakref.WeakSet[Any] = weakref.WeakSet()  # the loop layers whose connections hold it


def awake_channel(layer: Any) -> str:
    """The channel that keeps ``layer``'s readers awake on this loop."""
    return f"{layer._get_layer().prefix}__{_AWAKE_CHANNEL}"


async def _keep_receivers_awake(loop_layer: Any) -> None:
    if loop_layer in _AWAKE:
        return
    for shard in loop_layer._shards:
        await shard.subscribe(f"{loop_layer.prefix}__{_AWAKE_CHANNEL}")
    _AWAKE.add(loop_layer)
