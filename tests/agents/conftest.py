"""Agent tests run turns in-process: close the connections their worker thread opened, and
forget cached /info answers between tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from agents.remote.discovery import remote_info_cache_clear


@pytest.fixture(autouse=True)
async def _close_run_thread_connections() -> AsyncIterator[None]:
    remote_info_cache_clear()
    yield
    remote_info_cache_clear()
    await sync_to_async(connections.close_all)()
