"""The turn's connection pool, on the test database: a bound, a bounded wait, no broken reuse."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from conversations.store.pg import _conninfo
from conversations.store.pool import PoolTimeout, TurnPool

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
async def pool() -> AsyncIterator[TurnPool]:
    pool = TurnPool(_conninfo(), max_size=1, timeout=0.3)
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

    async def hold() -> None:
        async with pool.connection():
            order.append("first in")
            await asyncio.sleep(0.1)
            order.append("first out")

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0.02)
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
