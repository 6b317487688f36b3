"""Following a run through the lossy channel layer and the durable log (``follow_run``).

The layer only notifies; the log is the truth. Whatever the layer does (nothing yet, drops,
duplicates, reorders), a follower yields every logged event exactly once, in order, and stops
at ``run_finished``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis
from channels.layers import get_channel_layer
from django.contrib.auth.models import AnonymousUser
from django.db import OperationalError
from django.test import override_settings

from conversations.models import Run, RunEvent, RunStatus, Thread
from conversations.services.runs import LoggedEvent
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.runs import relay
from copilot_runtime.runs.execute import run_execute
from copilot_runtime.runs.relay import announce_batch, follow_run, run_group
from copilot_runtime.runs.start import turn_prepare
from tests.support.waiting import eventually

pytestmark = pytest.mark.django_db(transaction=True)

IN_MEMORY = "channels.layers.InMemoryChannelLayer"
REDIS = "channels_redis.core.RedisChannelLayer"
# The standalone site's layer with Redis (settings.py): pushed, and never holding a message.
REDIS_PUBSUB = "channels_redis.pubsub.RedisPubSubChannelLayer"
REDIS_TEST_DATABASE = 14  # apart from the e2e modules' databases (1, 2, ...)
FOLLOW_TIMEOUT = 20.0


def layer_settings(backend: str, *, capacity: int = 100) -> dict[str, Any]:
    config: dict[str, Any] = {"capacity": capacity}
    if backend == REDIS_PUBSUB:
        config.pop("capacity")  # it keeps no queue to bound
    if backend in (REDIS, REDIS_PUBSUB):
        url = redis_layer_url()
        client = redis.Redis.from_url(url)
        try:
            client.flushdb()
        finally:
            client.close()
        # The list layer's host as copilot_runtime.E008 asks (no socket timeout under its
        # blocking reads); the pub/sub layer's reads carry their own timeout.
        config["hosts"] = [{"address": url, "socket_timeout": None} if backend == REDIS else url]
    return {"default": {"BACKEND": backend, "CONFIG": config}}


def redis_layer_url() -> str:
    base = os.environ.get("TEST_REDIS_URL")
    if not base:
        pytest.fail("TEST_REDIS_URL is not set: run the suite with scripts/test.sh")
    return base.rsplit("/", 1)[0] + f"/{REDIS_TEST_DATABASE}"


@pytest.fixture
def in_memory_layer() -> Iterator[None]:
    with override_settings(CHANNEL_LAYERS=layer_settings(IN_MEMORY)):
        yield


@pytest.fixture
async def run_id(in_memory_layer: None) -> str:
    thread = await Thread.objects.acreate(thread_id="relay-thread")
    run = await Run.objects.acreate(id="relay-run", thread=thread, status=RunStatus.RUNNING)
    return run.id


def reply_events(words: int) -> list[LoggedEvent]:
    """A small run's log: a text message of ``words`` deltas, then ``run_finished``."""
    payloads: list[tuple[str, dict[str, Any]]] = [("text_start", {"message_id": "m1"})]
    payloads += [("text_delta", {"message_id": "m1", "delta": f" w{n}"}) for n in range(words)]
    payloads += [("text_end", {"message_id": "m1"}), ("run_finished", {"status": "succeeded"})]
    return [
        LoggedEvent(seq=seq, type=kind, payload=payload)
        for seq, (kind, payload) in enumerate(payloads, start=1)
    ]


async def write_log(run_id: str, events: list[LoggedEvent]) -> None:
    await RunEvent.objects.abulk_create(
        [RunEvent(run_id=run_id, seq=e.seq, type=e.type, payload=e.payload) for e in events]
    )


def as_tuples(events: list[LoggedEvent]) -> list[tuple[int, str, dict[str, Any]]]:
    return [(e.seq, e.type, e.payload) for e in events]


class Follower:
    """``follow_run`` in a task, its events collected; ``joined`` once it is in the group."""

    def __init__(
        self, run_id: str, *, after_seq: int = 0, pause_every: int = 0, pause: float = 0.0
    ) -> None:
        self.events: list[LoggedEvent] = []
        self._run_id = run_id
        self._after_seq = after_seq
        self._pause_every = pause_every
        self._pause = pause
        self.task: asyncio.Task[None] = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        async for event in follow_run(self._run_id, after_seq=self._after_seq):
            self.events.append(event)
            if self._pause_every and len(self.events) % self._pause_every == 0:
                await asyncio.sleep(self._pause)  # a slow consumer (a slow client socket)

    async def joined(self) -> None:
        await in_group(self._run_id)

    async def finished(self) -> list[LoggedEvent]:
        await asyncio.wait_for(self.task, FOLLOW_TIMEOUT)
        return self.events


async def in_group(run_id: str) -> None:
    """Returns once a follower of the run is in its group, on any of the layers here: the
    in-memory layer's groups, the Redis lists layer's group set, the pub/sub layer's
    subscription as Redis counts it."""
    from channels_redis.core import RedisChannelLayer
    from channels_redis.pubsub import RedisPubSubChannelLayer
    from redis import asyncio as redis_asyncio

    layer = get_channel_layer()
    group = run_group(run_id)
    client = None
    if isinstance(layer, RedisChannelLayer | RedisPubSubChannelLayer):
        client = redis_asyncio.Redis.from_url(redis_layer_url())

    async def joined() -> bool:
        if isinstance(layer, RedisPubSubChannelLayer):
            channel = layer._get_layer()._get_group_channel_name(group)
            [(_, subscribers)] = await client.pubsub_numsub(channel)
            return subscribers > 0
        if isinstance(layer, RedisChannelLayer):
            return await client.zcard(layer._group_key(group)) > 0
        return bool(layer.groups.get(group))

    try:
        await eventually(joined, what="the follower joined the run's group")
    finally:
        if client is not None:
            await client.aclose()


@pytest.fixture
def log_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The seqs a follower read from the log (rather than from the layer)."""
    seqs: list[int] = []
    original = relay.log_fetch

    async def counting(**kwargs: Any) -> list[LoggedEvent]:
        rows = await original(**kwargs)
        seqs.extend(row.seq for row in rows)
        return rows

    monkeypatch.setattr(relay, "log_fetch", counting)
    return seqs


async def test_a_late_follower_reads_the_whole_log_and_stops_at_run_finished(
    run_id: str, log_reads: list[int]
) -> None:
    events = reply_events(5)
    await write_log(run_id, events)

    followed = await Follower(run_id).finished()

    assert as_tuples(followed) == as_tuples(events)
    assert log_reads == [e.seq for e in events]
    # It left the run's group when it stopped.
    assert not get_channel_layer().groups.get(run_group(run_id))


async def test_a_follower_resumes_after_the_seq_it_already_has(run_id: str) -> None:
    events = reply_events(5)
    await write_log(run_id, events)

    followed = await Follower(run_id, after_seq=3).finished()

    assert as_tuples(followed) == as_tuples(events[3:])


async def test_live_batches_arrive_through_the_layer(run_id: str, log_reads: list[int]) -> None:
    events = reply_events(6)
    follower = Follower(run_id)
    await follower.joined()

    for start in range(0, len(events), 3):
        batch = events[start : start + 3]
        await write_log(run_id, batch)  # logged first, announced second, as the executor does
        await announce_batch(run_id, batch)

    assert as_tuples(await follower.finished()) == as_tuples(events)
    assert log_reads == []  # nothing was missed, so nothing was read back


async def test_a_batch_the_layer_dropped_is_read_from_the_log(
    run_id: str, log_reads: list[int]
) -> None:
    events = reply_events(7)  # seqs 1..10
    follower = Follower(run_id)
    await follower.joined()
    await write_log(run_id, events)

    await announce_batch(run_id, events[:3])
    # events[3:6] are never announced: the layer lost them.
    await announce_batch(run_id, events[6:])

    assert as_tuples(await follower.finished()) == as_tuples(events)
    assert {4, 5, 6} <= set(log_reads)
    assert not {1, 2, 3} & set(log_reads)  # those came through the layer


async def test_out_of_order_and_repeated_announcements_yield_each_event_once_in_order(
    run_id: str,
) -> None:
    events = reply_events(7)
    follower = Follower(run_id)
    await follower.joined()
    await write_log(run_id, events)

    await announce_batch(run_id, events[3:6])  # ahead of what the follower has
    await announce_batch(run_id, events[:3])  # late: already read from the log
    await announce_batch(run_id, events[3:6])  # a duplicate
    await announce_batch(run_id, events[5:])  # overlapping the previous one

    assert as_tuples(await follower.finished()) == as_tuples(events)


async def test_the_follower_stops_at_run_finished_and_leaves_the_group(run_id: str) -> None:
    events = reply_events(2)
    follower = Follower(run_id)
    await follower.joined()
    await write_log(run_id, events)

    await announce_batch(run_id, events)

    assert as_tuples(await follower.finished()) == as_tuples(events)
    assert not get_channel_layer().groups.get(run_group(run_id))


# --- a follower that joined before its run was queued ------------------------------------------


@pytest.fixture
def log_fetches(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every read of the log a follower made (found rows or not)."""
    calls: list[dict[str, Any]] = []
    original = relay.log_fetch

    async def counting(**kwargs: Any) -> list[LoggedEvent]:
        calls.append(kwargs)
        return await original(**kwargs)

    monkeypatch.setattr(relay, "log_fetch", counting)
    return calls


def follow_joined(run_id: str, joined: Any) -> asyncio.Task[list[LoggedEvent]]:
    async def follow() -> list[LoggedEvent]:
        return [event async for event in follow_run(run_id, joined=joined)]

    return asyncio.create_task(follow())


@pytest.mark.parametrize("joined_first", [True, False], ids=["joined first", "joins itself"])
async def test_a_follower_that_joined_before_the_run_was_queued_does_not_read_the_log_first(
    run_id: str, log_fetches: list[dict[str, Any]], joined_first: bool
) -> None:
    events = reply_events(4)
    joined = await relay.join_run(run_id) if joined_first else None
    following = follow_joined(run_id, joined)
    if not joined_first:
        await in_group(run_id)
    await write_log(run_id, events)
    await announce_batch(run_id, events)

    assert as_tuples(await asyncio.wait_for(following, FOLLOW_TIMEOUT)) == as_tuples(events)
    # The one read a follower that joins itself makes (nothing was logged yet: it finds none).
    assert len(log_fetches) == (0 if joined_first else 1)
    assert not get_channel_layer().groups.get(run_group(run_id))


async def test_a_follower_that_joined_first_still_reads_a_dropped_batch_from_the_log(
    run_id: str, log_reads: list[int]
) -> None:
    events = reply_events(7)  # seqs 1..10
    following = follow_joined(run_id, await relay.join_run(run_id))
    await write_log(run_id, events)

    await announce_batch(run_id, events[:3])
    await announce_batch(run_id, events[6:])  # events[3:6] lost by the layer

    assert as_tuples(await asyncio.wait_for(following, FOLLOW_TIMEOUT)) == as_tuples(events)
    assert set(log_reads) == {4, 5, 6}


async def test_a_follower_that_joined_first_reads_the_log_when_the_layer_says_nothing(
    run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(relay, "IDLE_CHECK_SECONDS", 0.05)
    events = reply_events(3)
    following = follow_joined(run_id, await relay.join_run(run_id))
    await write_log(run_id, events)  # logged, never announced

    assert as_tuples(await asyncio.wait_for(following, FOLLOW_TIMEOUT)) == as_tuples(events)


async def test_followers_on_redis_pub_sub_keep_no_channel_once_they_end(
    run_id: str, log_fetches: list[dict[str, Any]]
) -> None:
    with override_settings(CHANNEL_LAYERS=layer_settings(REDIS_PUBSUB)):
        layer = get_channel_layer()
        try:
            for _ in range(3):
                events = reply_events(2)
                joined = await relay.join_run(run_id)
                following = follow_joined(run_id, joined)
                await asyncio.sleep(0)
                await announce_batch(run_id, events)
                assert as_tuples(await asyncio.wait_for(following, 5)) == as_tuples(events)
            loop_layer = layer._get_layer()
            assert (loop_layer.channels, loop_layer.groups) == ({}, {})
            assert log_fetches == []
        finally:
            await layer.flush()


# --- slow followers on a layer that drops --------------------------------------------------------


def tokens_text(count: int) -> str:
    return " ".join(f"t{index}" for index in range(count))


@pytest.fixture
async def close_layer() -> AsyncIterator[None]:
    yield
    layer = get_channel_layer()
    if hasattr(layer, "close_pools"):
        await layer.close_pools()


def assert_followed_exactly(followed: list[LoggedEvent], logged: list[RunEvent]) -> None:
    assert [e.seq for e in followed] == list(range(1, len(logged) + 1))
    assert as_tuples(followed) == [(e.seq, e.type, e.payload) for e in logged]
    assert followed[-1].type == "run_finished"


def assert_layer_dropped_and_delivered(log_reads: list[int], followed: list[LoggedEvent]) -> None:
    # Gaps were read back from the log (the layer dropped), and the layer still delivered some.
    assert log_reads, "no gap was ever read from the log: the layer dropped nothing"
    assert len(set(log_reads)) < len(followed)


@pytest.mark.parametrize("backend", [REDIS, REDIS_PUBSUB], ids=["redis-lists", "redis-pubsub"])
async def test_a_long_live_reply_arrives_through_a_redis_layer_whole_and_in_order(
    backend: str, run_id: str, log_reads: list[int]
) -> None:
    events = reply_events(1000)
    with override_settings(CHANNEL_LAYERS=layer_settings(backend, capacity=len(events))):
        follower = Follower(run_id)
        await follower.joined()  # before the first batch
        for start in range(0, len(events), 20):
            batch = events[start : start + 20]
            await write_log(run_id, batch)
            await announce_batch(run_id, batch)
        followed = await follower.finished()
        layer = get_channel_layer()
        # Its connections closed: the lists layer's pools; the pub/sub layer's flush (it
        # holds no messages to lose).
        await (layer.close_pools() if backend == REDIS else layer.flush())

    assert as_tuples(followed) == as_tuples(events)
    # What the follower did not read back from the log came through the layer.
    assert len(log_reads) < len(events) / 2


@pytest.mark.parametrize("backend", [IN_MEMORY, REDIS], ids=["in-memory", "redis"])
async def test_a_slow_follower_of_a_5000_token_reply_on_a_dropping_layer_misses_nothing(
    backend: str, run_id: str, log_reads: list[int], close_layer: None
) -> None:
    tokens = 5000
    deltas = [
        ("text_delta", {"message_id": "m1", "delta": f"t{n}" if n == 0 else f" t{n}"})
        for n in range(tokens)
    ]
    payloads = [("text_start", {"message_id": "m1"}), *deltas]
    payloads += [("text_end", {"message_id": "m1"}), ("run_finished", {"status": "succeeded"})]
    events = [
        LoggedEvent(seq=seq, type=kind, payload=payload)
        for seq, (kind, payload) in enumerate(payloads, start=1)
    ]
    with override_settings(CHANNEL_LAYERS=layer_settings(backend, capacity=1)):
        # Slower than the producer: its one-message channel overflows while it pauses. Each
        # pause outlasts several of the producer's batches (a write and an announcement each)
        # however slow the machine: at 10 ms a machine whose writes took as long dropped
        # nothing, and the log's gap reading went untested.
        follower = Follower(run_id, pause_every=500, pause=0.2)
        await follower.joined()  # before the first batch
        for start in range(0, len(events), 20):  # logged, then announced, batch by batch
            batch = events[start : start + 20]
            await write_log(run_id, batch)
            await announce_batch(run_id, batch)
        followed = await follower.finished()

    logged = [e async for e in RunEvent.objects.filter(run_id=run_id).order_by("seq")]
    assert len(logged) == tokens + 3
    assert_followed_exactly(followed, logged)
    text = "".join(e.payload["delta"] for e in followed if e.type == "text_delta")
    assert text == tokens_text(tokens)
    assert_layer_dropped_and_delivered(log_reads, followed)


@pytest.fixture
def runtime_on_fake(fake_upstream: Any) -> Iterator[None]:
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
            "EXECUTOR": "inline",
            # Many small batches: many announcements for the layer to drop.
            "EVENT_FLUSH_MS": 1,
        }
    ):
        yield


async def test_a_slow_follower_of_a_real_run_on_a_dropping_layer_misses_nothing(
    runtime_on_fake: None, log_reads: list[int]
) -> None:
    tokens = 200
    request = parse_generate_input(
        {
            "threadId": "relay-real-run",
            "frontend": {"actions": []},
            "messages": [
                {
                    "id": "u1",
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "textMessage": {
                        "content": f'FAKE: {{"tokens": {tokens}, "delay_ms": 1}}',
                        "role": "user",
                    },
                }
            ],
            "metadata": {"requestType": "Chat"},
        },
        {},
    )
    with override_settings(CHANNEL_LAYERS=layer_settings(IN_MEMORY, capacity=1)):
        prepared = await turn_prepare(user=AnonymousUser(), request=request, protocol="graphql")
        follower = Follower(prepared.run_id, pause_every=10, pause=0.02)
        await follower.joined()  # before the run starts
        # Executed as a worker executes it: no in-process watcher, only the log and the layer.
        producer = asyncio.create_task(
            run_execute(run_id=prepared.run_id, thread_id=prepared.thread_id, request=request)
        )
        followed = await follower.finished()
        assert await asyncio.wait_for(producer, FOLLOW_TIMEOUT) == RunStatus.SUCCEEDED

    logged = [e async for e in RunEvent.objects.filter(run_id=prepared.run_id).order_by("seq")]
    assert_followed_exactly(followed, logged)
    text = "".join(e.payload["delta"] for e in followed if e.type == "text_delta")
    assert text == tokens_text(tokens)
    assert_layer_dropped_and_delivered(log_reads, followed)


async def test_a_follower_goes_on_with_the_layer_while_the_log_cannot_be_read(
    run_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database restarting under a live run: what the layer brings in order is relayed;
    a gap waits for the log, read once the database answers; nothing ends the stream."""
    monkeypatch.setattr(relay, "IDLE_CHECK_SECONDS", 0.05)
    events = reply_events(6)  # seqs 1..9
    down = True
    original = relay.log_fetch

    async def fetch(**kwargs: Any) -> list[LoggedEvent]:
        if down:
            raise OperationalError("the database system is shutting down")
        return await original(**kwargs)

    monkeypatch.setattr(relay, "log_fetch", fetch)
    checked_while_down = asyncio.Event()
    checks = 0

    async def check_alive() -> None:
        nonlocal checks
        if down:
            checks += 1
            if checks >= 2:
                checked_while_down.set()
            raise OperationalError("the database system is shutting down")

    collected: list[LoggedEvent] = []

    async def follow() -> None:
        joined = await relay.join_run(run_id)
        async for event in follow_run(run_id, check_alive=check_alive, joined=joined):
            collected.append(event)

    following = asyncio.create_task(follow())
    await in_group(run_id)
    await write_log(run_id, events)
    await announce_batch(run_id, events[:3])
    # Silent for longer than the idle check, twice, while neither the log nor the liveness
    # check answers: the follower stays.
    await asyncio.wait_for(checked_while_down.wait(), FOLLOW_TIMEOUT)
    await announce_batch(run_id, events[5:])  # events[3:5] dropped by the layer
    assert not following.done()
    assert [event.seq for event in collected] == [1, 2, 3]  # the gap is not skipped

    down = False
    await asyncio.wait_for(following, FOLLOW_TIMEOUT)
    assert as_tuples(collected) == as_tuples(events)
