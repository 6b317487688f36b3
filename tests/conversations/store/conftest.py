from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from conversations.store.pg import POOLS, PgTurnStore


@pytest.fixture
async def pg() -> AsyncIterator[PgTurnStore]:
    """The raw-SQL store; its connection pools are closed after the test."""
    yield PgTurnStore()
    await POOLS.close_all()
