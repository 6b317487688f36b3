"""Answers to the process that queued a run: one reply group per event loop, each batch handed to
the follower of the run it names, and followed exactly as on the run's own group.

On the Redis pub/sub layer against a real Redis (the standalone site's layer with Redis), and
on the in-memory layer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
from channels.layers import get_channel_layer
from django.test import override_settings

from conversations.services.runs import LoggedEvent
from copilot_runtime.runs import relay
from copilot_runtime.runs.layer_groups import GroupListener
from copilot_runtime.runs.relay import announce_batch, announce_batches, follow_run
from copilot_runtime.runs.replies import (
    LoopReplies,
    ReplySlot,
    announcements,
    reply_group,
    replying_to,
)
from tests.copilot_runtime.runs.test_stops import IN_MEMORY, REDIS_PUBSUB, _layers

RECEIVE_TIMEOUT = 5.0


@pytest.fixture(params=[IN_MEMORY, REDIS_PUBSUB], ids=["in-memory", "pubsub"])
async def layer(request: pytest.FixtureRequest, redis_client: redis.Redis) -> AsyncIterator[Any]:
    with override_settings(CHANNEL_LAYERS=_layers(request.param)):
        layer = get_channel_layer()
        try:
            yield layer
        finally:
            await layer.flush()  # its subscriptions and tasks end with the test


@pytest.fixture
async def pubsub_layer(redis_client: redis.Redis) -> AsyncIterator[Any]:
    with override_settings(CHANNEL_LAYERS=_layers(REDIS_PUBSUB)):
        layer = get_channel_layer()
        try:
            yield layer
        finally:
            await layer.flush()


def _batch(run_id: str, first_seq: int, count: int, *, last: bool = False) -> list[LoggedEvent]:
    events = [
        LoggedEvent(seq=seq, type="text_delta", payload={"delta": f"{run_id}:{seq}"})
        for seq in range(first_seq, first_seq + count)
    ]
    if last:
        events.append(
            LoggedEvent(seq=first_seq + count, type="run_finished", payload={"status": "succeeded"})
        )
    return events


async def _registered(replies: LoopReplies, run_id: str) -> ReplySlot:
    slot = await replies.register(run_id)
    assert slot is not None, "the reply group could not be joined"
    return slot


async def _receive(slot: Any) -> dict[str, Any]:
    return dict(await asyncio.wait_for(slot.receive(), RECEIVE_TIMEOUT))


async def test_each_run_receives_its_own_batches_from_the_loops_one_group(layer: Any) -> None:
    replies = LoopReplies()
    slots = {run_id: await _registered(replies, run_id) for run_id in ("run-a", "run-b")}
    assert all(slot.group == replies.group for slot in slots.values())

    with replying_to("run-a", replies.group), replying_to("run-b", replies.group):
        await announce_batches([("run-a", _batch("run-a", 1, 2)), ("run-b", _batch("run-b", 1, 1))])
        await announce_batch("run-b", _batch("run-b", 2, 1))

    a = await _receive(slots["run-a"])
    b = [await _receive(slots["run-b"]) for _ in range(2)]
    assert (a["run_id"], [seq for seq, _, _ in a["events"]]) == ("run-a", [1, 2])
    assert [(m["run_id"], [seq for seq, _, _ in m["events"]]) for m in b] == [
        ("run-b", [1]),
        ("run-b", [2]),
    ]
    for slot in slots.values():
        await slot.leave()


async def test_a_run_followed_on_the_reply_group_is_followed_whole(layer: Any) -> None:
    replies = LoopReplies()
    slot = await replies.register("run-whole")
    assert slot is not None

    async def follow() -> list[LoggedEvent]:
        return [event async for event in follow_run("run-whole", joined=slot)]

    following = asyncio.create_task(follow())
    with replying_to("run-whole", replies.group):
        await announce_batch("run-whole", _batch("run-whole", 1, 3))
        await announce_batch("run-whole", _batch("run-whole", 4, 2, last=True))
    followed = await asyncio.wait_for(following, RECEIVE_TIMEOUT)

    assert [event.seq for event in followed] == [1, 2, 3, 4, 5, 6]
    assert followed[-1].type == "run_finished"
    assert slot.left and not replies.following("run-whole")


async def test_the_runs_own_group_still_hears_every_batch(layer: Any) -> None:
    """Its other followers (a websocket, a reconnect, another process) join the run's group."""
    replies = LoopReplies()
    slot = await replies.register("run-both")
    own = await relay.join_run("run-both")
    assert slot is not None and own is not None
    try:
        with replying_to("run-both", replies.group):
            await announce_batch("run-both", _batch("run-both", 1, 1))
        on_own = dict(await asyncio.wait_for(own.receive(), RECEIVE_TIMEOUT))
        on_reply = await _receive(slot)
        assert on_own == {"type": relay.BATCH_MESSAGE, "events": on_reply["events"]}
    finally:
        await own.leave()
        await slot.leave()


async def test_without_a_reply_group_only_the_runs_own_group_hears(layer: Any) -> None:
    replies = LoopReplies()
    slot = await replies.register("run-alone")
    assert slot is not None
    await announce_batch("run-alone", _batch("run-alone", 1, 1))  # its task named no group
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(slot.receive(), 0.3)
    await slot.leave()


async def test_one_subscription_serves_every_run_of_the_loop(
    pubsub_layer: Any, redis_client: redis.Redis
) -> None:
    layer = pubsub_layer
    replies = LoopReplies()
    slots = [await _registered(replies, f"run-{n}") for n in range(20)]
    groups = [
        channel.decode() for channel in redis_client.pubsub_channels() if b"awake" not in channel
    ]
    assert groups == [layer._get_layer()._get_group_channel_name(replies.group)]
    for slot in slots:
        await slot.leave()
    assert not any(replies.following(f"run-{n}") for n in range(20))
    assert not any(b"run." in channel for channel in redis_client.pubsub_channels())


async def test_a_failed_reply_group_sends_its_followers_to_the_log_and_is_joined_again(
    layer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    fail = asyncio.Event()
    receiving = asyncio.Event()
    received = GroupListener.receive

    async def failing(self: GroupListener) -> dict[str, Any]:
        receiving.set()
        await fail.wait()
        raise ConnectionError("the layer went away")

    monkeypatch.setattr(GroupListener, "receive", failing)
    replies = LoopReplies()
    slots = [await _registered(replies, run_id) for run_id in ("run-failed", "run-followed")]
    following = asyncio.create_task(_followed(slots[1], "run-followed"))
    await asyncio.wait_for(receiving.wait(), 5)  # the reply group is listened to
    await relay_log(monkeypatch, "run-followed", _batch("run-followed", 1, 2, last=True))
    fail.set()

    # At once (not after a follower's idle second), each follower learns of the failure...
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(slots[0].receive(), 0.5)
    # ...and goes on from the log, which holds the whole run.
    followed = await asyncio.wait_for(following, 0.5)
    assert [event.seq for event in followed] == [1, 2, 3]
    assert not replies.listening

    monkeypatch.setattr(GroupListener, "receive", received)
    again = await replies.register("run-after")
    assert again is not None and replies.listening
    with replying_to("run-after", replies.group):
        await announce_batch("run-after", _batch("run-after", 1, 1))
    assert [seq for seq, _, _ in (await _receive(again))["events"]] == [1]
    await again.leave()
    await replies.close()


async def _followed(slot: Any, run_id: str) -> list[LoggedEvent]:
    return [event async for event in follow_run(run_id, joined=slot)]


async def relay_log(
    monkeypatch: pytest.MonkeyPatch, run_id: str, events: list[LoggedEvent]
) -> None:
    """The run's log holds ``events`` (the follower's reads of it, answered in memory)."""

    async def fetch(
        *, run_id: str, after_seq: int, before_seq: int | None = None
    ) -> list[LoggedEvent]:
        return [
            event
            for event in events
            if event.seq > after_seq and (before_seq is None or event.seq < before_seq)
        ]

    monkeypatch.setattr(relay, "log_fetch", fetch)


def test_a_second_delivery_of_a_runs_task_ending_first_leaves_the_reply_group_in_place() -> None:
    group = "replies." + "a" * 32
    message = {"type": "run.batch", "events": []}
    with replying_to("run-twice", group):
        with replying_to("run-twice", group):  # the duplicate, whose claim fails
            pass
        assert announcements("run-twice", "run.x", message)[1] == (
            group,
            {**message, "run_id": "run-twice"},
        )
    assert announcements("run-twice", "run.x", message) == [("run.x", message)]


def test_only_a_reply_groups_name_is_taken_from_a_task() -> None:
    assert reply_group("replies." + "0" * 32) == "replies." + "0" * 32
    for value in (None, 7, "", "replies.", "run.abc", "replies." + "g" * 32, ["replies."]):
        assert reply_group(value) is None
