"""Many group messages in one round trip, on channels_redis's pub/sub layer.

``group_send`` publishes one message per call, under the shard's lock: the batches of fifty
runs flushed at the same moment queued behind each other's round trips, on the worker's one
event loop (py-spy: a tenth of its time). Here the messages of one moment go to each shard as
one pipeline of ``PUBLISH`` commands, under the same lock, on the same connection, serialized
by the layer itself: followers receive exactly what ``group_send`` would have published.

This reaches into the layer's own helpers (channels_redis 4.x, pinned in requirements.lock);
tests/copilot_runtime/engine/test_layer_publish.py holds it to ``group_send``'s delivery on a
real Redis. Any other layer sends one message at a time, through its public API; the
in-memory layer only to the groups someone joined.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from channels.layers import InMemoryChannelLayer


def is_redis_pubsub(layer: Any) -> bool:
    # Never imported here: a process on another layer does not load redis-py (~15 MiB).
    pubsub = sys.modules.get("channels_redis.pubsub")
    return pubsub is not None and isinstance(layer, pubsub.RedisPubSubChannelLayer)


async def group_send_many(layer: Any, messages: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """``layer.group_send(group, message)`` for each pair, in as few round trips as the layer
    allows. Raises what the layer raised (the caller decides what a lost message costs)."""
    if not is_redis_pubsub(layer):
        if isinstance(layer, InMemoryChannelLayer):
            # Its followers are in this process: a group nobody joined has no one to deliver
            # to, and its group_send would still walk every channel and group for expiry and
            # wait on an empty ``as_completed`` (most runs on this layer are followed by no
            # one but the HTTP stream that started them, which reads its run in-process).
            messages = [(group, message) for group, message in messages if layer.groups.get(group)]
        for group, message in messages:
            await layer.group_send(group, message)
        return
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
