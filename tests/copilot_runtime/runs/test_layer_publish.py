"""``group_send_many`` delivers what ``group_send`` delivers, in one round trip on Redis pub/sub.

It reaches into channels_redis's pub/sub layer (copilot_runtime/runs/layer_publish.py): these
tests run it against the real layer and a real Redis, so that an upgrade that moves what it
relies on fails here rather than in production.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisSingleShardConnection
from django.test import override_settings

from copilot_runtime.runs.layer_publish import group_send_many

REDIS_TEST_DATABASE = 13  # apart from the relay tests' (14) and the e2e modules' (1, 2, ...)


def _redis_url() -> str:
    base = os.environ.get("TEST_REDIS_URL")
    if not base:
        pytest.fail("TEST_REDIS_URL is not set: run the suite with scripts/test.sh")
    return base.rsplit("/", 1)[0] + f"/{REDIS_TEST_DATABASE}"


@pytest.fixture
def pubsub_layer() -> Iterator[Any]:
    backend = "channels_redis.pubsub.RedisPubSubChannelLayer"
    config = {"default": {"BACKEND": backend, "CONFIG": {"hosts": [_redis_url()]}}}
    with override_settings(CHANNEL_LAYERS=config):
        yield get_channel_layer()


# Sent by the test after what it published: what arrives before it is all that was published.
_BARRIER = {"type": "test.barrier"}


async def _receive(layer: Any, channel: str, count: int) -> list[dict[str, Any]]:
    """The next ``count`` messages of ``channel``, then checks that no other one is waiting
    (a receive that times out would make the pub/sub layer drop the channel)."""
    received = [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(count)]
    # Redis delivers to a subscriber in the order it took the PUBLISHes: anything published
    # but not expected comes before the test's own message.
    await layer.send(channel, _BARRIER)
    assert await asyncio.wait_for(layer.receive(channel), 5) == _BARRIER
    queues = (layer._get_layer() if hasattr(layer, "_get_layer") else layer).channels
    assert channel not in queues or queues[channel].qsize() == 0
    return received


async def test_each_groups_members_receive_its_messages_as_group_send_delivers_them(
    pubsub_layer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    layer = pubsub_layer
    try:
        await _deliveries_match(layer, monkeypatch)
    finally:
        await layer.flush()


async def _deliveries_match(layer: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("run.a", first)
    await layer.group_add("run.b", first)
    await layer.group_add("run.b", second)
    messages = [
        ("run.a", {"type": "run.batch", "events": [[1, "text_start", {"message_id": "m"}]]}),
        ("run.b", {"type": "run.batch", "events": [[4, "text_delta", {"delta": "é"}]]}),
        ("run.nobody", {"type": "run.batch", "events": []}),
        ("run.a", {"type": "run.batch", "events": [[2, "text_end", {}]]}),
    ]

    # Not one PUBLISH per message: the per-message path is out of use here.
    async def refused(self: Any, channel: str, message: bytes) -> None:
        raise AssertionError("published one message at a time")

    monkeypatch.setattr(RedisSingleShardConnection, "publish", refused)
    await group_send_many(layer, messages)
    monkeypatch.undo()

    assert await _receive(layer, first, 3) == [messages[0][1], messages[1][1], messages[3][1]]
    assert await _receive(layer, second, 1) == [messages[1][1]]

    # The same messages through the layer's own group_send arrive the same.
    for group, message in messages:
        await layer.group_send(group, message)
    assert await _receive(layer, first, 3) == [messages[0][1], messages[1][1], messages[3][1]]
    assert await _receive(layer, second, 1) == [messages[1][1]]


async def test_another_layer_gets_one_group_send_per_message() -> None:
    config = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    with override_settings(CHANNEL_LAYERS=config):
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add("run.a", channel)
        sent = [{"type": "run.batch", "events": [[n, "text_delta", {}]]} for n in (1, 2)]
        await group_send_many(layer, [("run.a", message) for message in sent])
        assert await _receive(layer, channel, 2) == sent


async def test_the_in_memory_layer_sends_to_the_groups_someone_joined(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    with override_settings(CHANNEL_LAYERS=config):
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add("run.a", channel)
        await layer.group_add("run.left", channel)
        await layer.group_discard("run.left", channel)
        sent: list[str] = []
        group_send = layer.group_send

        async def counted(group: str, message: dict[str, Any]) -> None:
            sent.append(group)
            await group_send(group, message)

        monkeypatch.setattr(layer, "group_send", counted)
        message = {"type": "run.batch", "events": [[1, "text_delta", {}]]}
        await group_send_many(
            layer, [("run.nobody", message), ("run.a", message), ("run.left", message)]
        )
        assert sent == ["run.a"]
        assert await _receive(layer, channel, 1) == [message]


async def test_with_the_lane_closed_the_pub_sub_layer_gets_its_own_group_send(
    pubsub_layer: Any, untested_version: Callable[[str], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    untested_version("channels-redis")
    layer = pubsub_layer
    sent: list[tuple[str, dict[str, Any]]] = []
    group_send = layer.group_send

    async def recorded(group: str, message: dict[str, Any]) -> None:
        sent.append((group, message))
        await group_send(group, message)

    monkeypatch.setattr(layer, "group_send", recorded)
    try:
        channel = await layer.new_channel()
        await layer.group_add("run.a", channel)
        messages = [
            ("run.a", {"type": "run.batch", "events": [[n, "text_delta", {}]]}) for n in (1, 2)
        ]
        await group_send_many(layer, messages)
        assert sent == messages
        assert await _receive(layer, channel, 2) == [message for _, message in messages]
    finally:
        await layer.flush()
