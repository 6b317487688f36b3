"""The turn's connection pool, on the test database: a bound, a bounded wait, no broken reuse."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from conversations.store.health import peer_closed
from conversations.store.pg.pools import conninfo
from conversations.store.pool import PoolTimeout, TurnPool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def pool() -> AsyncIterator[TurnPool]:
    pool = TurnPool(conninfo(), max_size=1, timeout=0.3)
    yield pool
    await pool.close()


async def test_a_free_connection_is_handed_over_without_waiting_for_the_loop(
    pool: TurnPool,
) -> None:
    async with pool.connection():
        pass  # connected once; idle now
    turned = asyncio.Event()
    asyncio.get_running_loop().call_soon(turned.set)
    async with pool.connection() as conn:
        # Nothing else ran in between: the statement can go out in this very step.
        assert not turned.is_set()
        assert await (await conn.execute("SELECT 1")).fetchone() == (1,)


async def test_a_caller_waits_for_a_connection_to_come_back(pool: TurnPool) -> None:
    order: list[str] = []
    held = asyncio.Event()

    async def hold() -> None:
        async with pool.connection():
            order.append("first in")
            held.set()
            await asyncio.sleep(0.1)
            order.append("first out")

    holder = asyncio.create_task(hold())
    await asyncio.wait_for(held.wait(), 10)
    async with pool.connection():
        order.append("second in")
    await holder
    assert order == ["first in", "first out", "second in"]


async def test_waiting_longer_than_the_timeout_fails_as_the_pools_error(pool: TurnPool) -> None:
    async with pool.connection():
        with pytest.raises(PoolTimeout):
            async with pool.connection():
                pass
    async with pool.connection() as conn:  # the slot came back
        assert await (await conn.execute("SELECT 2")).fetchone() == (2,)


async def test_a_connection_left_inside_a_transaction_is_not_handed_out_again(
    pool: TurnPool,
) -> None:
    async with pool.connection() as first:
        await first.execute("BEGIN")
    async with pool.connection() as second:
        assert second is not first
        assert await (await second.execute("SELECT 3")).fetchone() == (3,)


async def test_each_new_connection_runs_the_session_set_up() -> None:
    pool = TurnPool(conninfo(), max_size=2, timeout=0.3, session_setup="SET enable_seqscan = off")
    try:
        async with pool.connection() as first, pool.connection() as second:
            for conn in (first, second):
                assert await (await conn.execute("SHOW enable_seqscan")).fetchone() == ("off",)
    finally:
        await pool.close()


async def test_a_connection_handed_out_again_is_not_set_up_again() -> None:
    # Creating the same temporary table twice on one connection fails.
    pool = TurnPool(conninfo(), max_size=1, timeout=0.3, session_setup="CREATE TEMP TABLE ran ()")
    try:
        async with pool.connection() as first:
            pass
        async with pool.connection() as again:
            assert again is first
            assert await (await again.execute("SELECT count(*) FROM ran")).fetchone() == (0,)
    finally:
        await pool.close()


async def test_a_failing_session_set_up_fails_the_caller_and_frees_the_slot() -> None:
    pool = TurnPool(conninfo(), max_size=1, timeout=0.3, session_setup="SET no_such_setting = 1")
    try:
        for _ in range(2):  # the slot came back after the first failure
            with pytest.raises(psycopg.Error):
                async with pool.connection():
                    pass
        assert pool._idle == []
    finally:
        await pool.close()


async def test_the_stores_pools_price_sequential_scans_out() -> None:
    from conversations.store.pg.pools import POOLS

    try:
        async with (await POOLS.get()).connection() as conn:
            assert await (await conn.execute("SHOW enable_seqscan")).fetchone() == ("off",)
    finally:
        await POOLS.close_all()


async def _terminate(pid: int) -> None:
    async with await psycopg.AsyncConnection.connect(conninfo(), autocommit=True) as admin:
        await admin.execute("SELECT pg_terminate_backend(%s)", [pid])


async def _until_readable(conn: psycopg.AsyncConnection) -> None:
    """Until the server's goodbye reached the idle connection's socket."""
    loop = asyncio.get_running_loop()
    readable = asyncio.Event()
    loop.add_reader(conn.fileno(), readable.set)
    try:
        async with asyncio.timeout(10):
            await readable.wait()
    finally:
        loop.remove_reader(conn.fileno())
    assert peer_closed(conn.fileno())


async def test_an_idle_connection_the_server_ended_is_replaced_not_handed_out(
    pool: TurnPool,
) -> None:
    async with pool.connection() as conn:
        pid = (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0]
    await _terminate(pid)  # what a failover or an idle-connection reaper does
    await _until_readable(conn)

    async with pool.connection() as fresh:
        # Handed the ended session, this statement would fail ("terminating connection").
        row = await (await fresh.execute("SELECT pg_backend_pid()")).fetchone()
    assert fresh is not conn
    assert row is not None and row[0] != pid


async def test_a_live_idle_connection_is_reused(pool: TurnPool) -> None:
    async with pool.connection() as first:
        pass
    async with pool.connection() as second:
        pass
    assert second is first
