from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from conversations.store.pg import prepare as pg_prepare
from conversations.store.pg.look_up import LookUp
from conversations.store.pg.pools import POOLS
from conversations.store.pg.store import PgTurnStore


@pytest.fixture
async def pg() -> AsyncIterator[PgTurnStore]:
    """The raw-SQL store; its connection pools are closed after the test."""
    yield PgTurnStore()
    await POOLS.close_all()


@pytest.fixture
def blind_to_active_runs(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it to make every later look-up report no active run: the next turn then reads
    its thread as free while another's run is pending, as a request racing that one would."""

    def blind() -> None:
        look = pg_prepare.look

        async def without_active_runs(look_up: LookUp) -> tuple[Any, ...]:
            row = await look(look_up)
            return (*row[:3], None, *row[4:])

        monkeypatch.setattr(pg_prepare, "look", without_active_runs)

    return blind
