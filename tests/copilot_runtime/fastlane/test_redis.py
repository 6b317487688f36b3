"""One Redis command written before its caller first waits (copilot_runtime/fastlane/redis.py), on
the test Redis: the reply redis-py would read, and a pool left fit for the next command."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import redis
import redis.asyncio as redis_asyncio
from redis.exceptions import ResponseError

from copilot_runtime.fastlane.redis import command_at_once
from tests.copilot_runtime.runs.conftest import claims_redis_url
from tests.support.waiting import eventually

# A database of its own (the claims' tests use 12).
DATABASE = 11


@pytest.fixture
def observer() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(claims_redis_url(DATABASE))
    client.flushdb()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
async def client(observer: redis.Redis) -> AsyncIterator[redis_asyncio.Redis]:
    # With a socket timeout, as channels_redis's pools have.
    pool = redis_asyncio.ConnectionPool.from_url(claims_redis_url(DATABASE), socket_timeout=5)
    client = redis_asyncio.Redis(connection_pool=pool)
    try:
        yield client
    finally:
        await client.aclose()


def _in_use(client: redis_asyncio.Redis) -> int:
    return len(client.connection_pool._in_use_connections)


async def test_the_reply_is_the_one_redis_sends(
    client: redis_asyncio.Redis, observer: redis.Redis
) -> None:
    assert await command_at_once(client, "RPUSH", "queue", b"one") == 1
    assert await command_at_once(client, "RPUSH", "queue", b"two") == 2
    assert await command_at_once(client, "EVAL", "return ARGV[1]", 0, "echo") == b"echo"
    assert observer.lrange("queue", 0, -1) == [b"one", b"two"]
    assert _in_use(client) == 0  # the connection went back to the pool


async def test_the_command_is_written_before_the_caller_first_waits(
    client: redis_asyncio.Redis, observer: redis.Redis
) -> None:
    await command_at_once(client, "PING")  # a connection to Redis is open already
    seen: list[int] = []

    def in_redis_already() -> None:
        # Run right after the command's first step, the event loop held: only a command
        # written in that step can land.
        give_up = time.monotonic() + 2
        while observer.llen("queue") == 0 and time.monotonic() < give_up:
            time.sleep(0.001)
        seen.append(observer.llen("queue"))

    pushing = asyncio.ensure_future(command_at_once(client, "RPUSH", "queue", b"one"))
    asyncio.get_running_loop().call_soon(in_redis_already)
    assert await pushing == 1
    assert seen == [1]


async def test_an_error_reply_raises_and_the_next_command_is_served(
    client: redis_asyncio.Redis,
) -> None:
    connection_id = await command_at_once(client, "CLIENT", "ID")
    with pytest.raises(ResponseError):
        await command_at_once(client, "EVAL", "return redis.call('NOSUCHCOMMAND')", 0)
    assert await command_at_once(client, "ECHO", b"after") == b"after"
    assert _in_use(client) == 0
    # The error reply was read whole: the same connection, not a new one, serves on.
    assert await command_at_once(client, "CLIENT", "ID") == connection_id


async def test_a_connection_redis_dropped_raises_a_connection_error_then_reconnects(
    client: redis_asyncio.Redis, observer: redis.Redis
) -> None:
    # The callers fall back on redis-py's connection errors (the task to Celery's publish,
    # the claim to the database): a dropped connection must raise one, not hang or pass.
    connection_id = await command_at_once(client, "CLIENT", "ID")
    assert observer.client_kill_filter(_id=connection_id) == 1
    with pytest.raises((redis.exceptions.ConnectionError, OSError)):
        await command_at_once(client, "ECHO", b"lost")
    assert await command_at_once(client, "ECHO", b"again") == b"again"
    assert _in_use(client) == 0


async def test_a_command_cancelled_before_its_reply_leaves_no_stale_reply(
    client: redis_asyncio.Redis, observer: redis.Redis
) -> None:
    waiting = asyncio.ensure_future(command_at_once(client, "BLPOP", "empty", 1))
    # Blocked in Redis (this worker's own server: no other client blocks there).
    await eventually(
        lambda: observer.info("clients")["blocked_clients"], what="the BLPOP blocked in Redis"
    )
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    observer.rpush("empty", b"late")  # a reply the cancelled command's connection never reads
    assert await command_at_once(client, "ECHO", b"mine") == b"mine"
    assert _in_use(client) == 0


async def test_with_the_lane_closed_the_command_goes_through_redis_py(
    client: redis_asyncio.Redis,
    observer: redis.Redis,
    untested_version: Callable[[str], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    untested_version("redis")
    executed: list[tuple[object, ...]] = []
    execute_command = client.execute_command

    async def recorded(*args: object, **options: object) -> object:
        executed.append(args)
        return await execute_command(*args, **options)

    monkeypatch.setattr(client, "execute_command", recorded)
    assert await command_at_once(client, "RPUSH", "queue", b"one") == 1
    assert await command_at_once(client, "EVAL", "return ARGV[1]", 0, "echo") == b"echo"
    assert observer.lrange("queue", 0, -1) == [b"one"]
    assert executed == [("RPUSH", "queue", b"one"), ("EVAL", "return ARGV[1]", 0, "echo")]
    assert _in_use(client) == 0
