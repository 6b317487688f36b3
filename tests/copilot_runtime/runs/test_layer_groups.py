"""``GroupListener``: in a group of the channel layer until it leaves, and nothing kept after.

On channels_redis's pub/sub layer it reaches into the layer (copilot_runtime/engine/
layer_groups.py): these tests run it against the real layer and a real Redis, so that an upgrade
that moves what it relies on fails here rather than in production.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from channels.layers import get_channel_layer
from django.test import override_settings

from copilot_runtime.fastlane.channels_redis import awake_channel
from copilot_runtime.runs.layer_groups import GroupListener
from tests.copilot_runtime.runs.test_layer_publish import _redis_url

IN_MEMORY = "channels.layers.InMemoryChannelLayer"
REDIS_LISTS = "channels_redis.core.RedisChannelLayer"
REDIS_PUBSUB = "channels_redis.pubsub.RedisPubSubChannelLayer"


# The pub/sub layer through its public API only, as a channels_redis release the fast lane
# was not tested with has it (copilot_runtime/fastlane).
REDIS_PUBSUB_PUBLIC = "pubsub, lane closed"


@pytest.fixture(
    params=[IN_MEMORY, REDIS_LISTS, REDIS_PUBSUB, REDIS_PUBSUB_PUBLIC],
    ids=["in-memory", "lists", "pubsub", "pubsub-public"],
)
def layer(
    request: pytest.FixtureRequest,
    redis_client: redis.Redis,
    untested_version: Callable[[str], None],
) -> Iterator[Any]:
    config: dict[str, Any] = {}
    backend = request.param
    if backend == REDIS_PUBSUB_PUBLIC:
        untested_version("channels-redis")
        backend = REDIS_PUBSUB
    if backend == REDIS_LISTS:
        # As copilot_runtime.E008 asks: no socket timeout under the layer's blocking reads.
        config["hosts"] = [{"address": _redis_url(), "socket_timeout": None}]
    elif backend == REDIS_PUBSUB:
        config["hosts"] = [_redis_url()]
    layers = {"default": {"BACKEND": backend, "CONFIG": config}}
    with override_settings(CHANNEL_LAYERS=layers):
        yield get_channel_layer()


def _listening(client: redis.Redis) -> list[bytes]:
    """The channels subscribed in Redis, but the one each connection keeps to stay awake."""
    return [channel for channel in client.pubsub_channels() if channel != b"asgi__awake"]


async def _close(layer: Any) -> None:
    # The lists layer's pools; the others hold nothing a flush would lose.
    await (layer.close_pools() if hasattr(layer, "close_pools") else layer.flush())


async def test_a_member_receives_its_groups_messages_until_it_leaves(layer: Any) -> None:
    try:
        listener = await GroupListener.join(layer, "run.a")
        other = await GroupListener.join(layer, "run.b")
        await layer.group_send("run.a", {"type": "run.batch", "n": 1})
        await layer.group_send("run.b", {"type": "run.batch", "n": 2})
        await layer.group_send("run.a", {"type": "run.batch", "n": 3})

        assert await asyncio.wait_for(listener.receive(), 5) == {"type": "run.batch", "n": 1}
        assert await asyncio.wait_for(listener.receive(), 5) == {"type": "run.batch", "n": 3}
        assert await asyncio.wait_for(other.receive(), 5) == {"type": "run.batch", "n": 2}
        await listener.leave()
        await other.leave()
        assert listener.left
    finally:
        await _close(layer)


async def test_a_receive_that_timed_out_keeps_the_membership_and_loses_nothing(
    layer: Any,
) -> None:
    try:
        listener = await GroupListener.join(layer, "run.c")
        for _ in range(3):  # a follower's idle checks
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(listener.receive(), 0.05)
        await layer.group_send("run.c", {"type": "run.batch", "n": 4})

        assert await asyncio.wait_for(listener.receive(), 5) == {"type": "run.batch", "n": 4}
        await listener.leave()
    finally:
        await _close(layer)


async def test_on_the_list_layer_a_listener_idle_past_the_blocking_read_still_receives(
    redis_client: redis.Redis,
) -> None:
    """The list layer's blocking read ends after ``brpop_timeout`` (5 s) and is read again:
    with the host configured as copilot_runtime.E008 asks, a follower idle longer than that
    (a slow model) keeps waiting. With redis-py 8's default 5 s socket timeout this failed
    with redis's "Timeout reading from ..." at 5 s."""
    config = {"hosts": [{"address": _redis_url(), "socket_timeout": None}]}
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": REDIS_LISTS, "CONFIG": config}}):
        layer = get_channel_layer()
        assert layer.brpop_timeout == 5
        try:
            listener = await GroupListener.join(layer, "run.idle")
            receiving = asyncio.ensure_future(listener.receive())
            await asyncio.sleep(layer.brpop_timeout + 1.5)
            assert not receiving.done()
            await layer.group_send("run.idle", {"type": "run.batch", "n": 1})

            assert await asyncio.wait_for(receiving, 5) == {"type": "run.batch", "n": 1}
            await listener.leave()
        finally:
            await _close(layer)


@pytest.mark.parametrize("timeouts", [0, 2], ids=["ended on its last message", "idle first"])
async def test_on_redis_pub_sub_a_listener_that_left_keeps_nothing_here_or_in_redis(
    redis_client: redis.Redis, timeouts: int
) -> None:
    """The layer's own channels stayed subscribed, queue and all, once their follower ended on
    its last message: one per followed run, for the life of the process."""
    config = {"hosts": [_redis_url()]}
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": REDIS_PUBSUB, "CONFIG": config}}):
        layer = get_channel_layer()
        try:
            for run in range(20):
                listener = await GroupListener.join(layer, f"run.{run}")
                for _ in range(timeouts):
                    with pytest.raises(TimeoutError):
                        await asyncio.wait_for(listener.receive(), 0.02)
                # The group is the one subscription (a subscription of one's own channel
                # too was a second command each way).
                assert len(_listening(redis_client)) == 1
                await layer.group_send(f"run.{run}", {"type": "run.batch", "run": run})
                assert (await asyncio.wait_for(listener.receive(), 5))["run"] == run
                await listener.leave()

            loop_layer = layer._get_layer()
            assert loop_layer.channels == {}
            assert loop_layer.groups == {}
            assert _listening(redis_client) == []
        finally:
            await layer.flush()


async def test_a_listener_that_cannot_join_leaves_nothing_behind(redis_client: redis.Redis) -> None:
    config = {"hosts": ["redis://127.0.0.1:1/0"]}  # nothing listens there
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": REDIS_PUBSUB, "CONFIG": config}}):
        layer = get_channel_layer()
        try:
            with pytest.raises(redis.exceptions.ConnectionError):
                await GroupListener.join(layer, "run.d")
            assert layer._get_layer().channels == {}
        finally:
            await layer.flush()


async def test_on_redis_pub_sub_a_listener_stopped_while_it_leaves_still_leaves(
    redis_client: redis.Redis,
) -> None:
    """A run's follower is stopped as soon as its answer ends, often while it is leaving, and
    under load its ``UNSUBSCRIBE`` waits its turn on the connection (the layer's lock, held by
    the other followers' subscriptions): cut there, it kept most followed runs' groups
    subscribed in Redis, for good."""
    config = {"hosts": [_redis_url()]}
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": REDIS_PUBSUB, "CONFIG": config}}):
        layer = get_channel_layer()
        loop_layer = layer._get_layer()
        try:
            for run in range(10):
                listener = await GroupListener.join(layer, f"run.{run}")
                shard = loop_layer._get_shard(loop_layer._get_group_channel_name(f"run.{run}"))
                async with shard._lock:  # another follower's subscription under way
                    leaving = asyncio.create_task(listener.leave())
                    await asyncio.sleep(0.01)
                    leaving.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await leaving
                assert listener.left

            for _ in range(500):
                if not _listening(redis_client):
                    break
                await asyncio.sleep(0.01)
            assert _listening(redis_client) == []
            assert loop_layer.channels == {}
            assert loop_layer.groups == {}
        finally:
            await layer.flush()


async def test_on_redis_pub_sub_the_reader_stays_awake_once_every_listener_left(
    redis_client: redis.Redis,
) -> None:
    """channels_redis's reader sleeps 100 ms at a time while its connection has no
    subscription: a follower joining then got its run's first batch up to 100 ms late, every
    turn of a lone user. One channel stays subscribed, so the reader always waits on Redis."""
    config = {"hosts": [_redis_url()]}
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": REDIS_PUBSUB, "CONFIG": config}}):
        layer = get_channel_layer()
        loop_layer = layer._get_layer()
        try:
            for run in range(3):
                listener = await GroupListener.join(layer, f"run.{run}")
                await listener.leave()
                assert all(shard._pubsub.subscribed for shard in loop_layer._shards)
            assert redis_client.pubsub_channels() == [awake_channel(layer).encode()]
            assert loop_layer.channels == {}
            assert loop_layer.groups == {}
        finally:
            await layer.flush()
