"""Engine tests run turns in-process: close the connections their worker thread opened."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import redis
from asgiref.sync import sync_to_async
from django.db import connections

from tests.copilot_runtime.engine.test_layer_publish import _redis_url


@pytest.fixture(autouse=True)
async def _close_run_thread_connections() -> AsyncIterator[None]:
    # Runs write through asgiref's thread-sensitive executor; its connection would otherwise
    # outlive the test and keep the test database from being dropped.
    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture
def redis_client() -> Iterator[redis.Redis]:
    """A client of the test Redis's database for the layer tests, emptied first."""
    client = redis.Redis.from_url(_redis_url())
    client.flushdb()
    try:
        yield client
    finally:
        client.close()
