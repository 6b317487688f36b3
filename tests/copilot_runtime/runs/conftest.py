"""Engine tests run turns in-process: close the connections their worker thread opened."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connections
from django.test import override_settings

from tests.copilot_runtime.runs.test_layer_publish import _redis_url


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


# The claims' tests' database (run ids never repeat across them); apart from the layer tests'
# (13, 14) and the e2e modules' (1, 2, ...).
CLAIMS_REDIS_DATABASE = 12


def claims_redis_url(database: int = CLAIMS_REDIS_DATABASE) -> str:
    base = os.environ.get("TEST_REDIS_URL")
    if not base:
        pytest.fail("TEST_REDIS_URL is not set: run the suite with scripts/test.sh")
    return base.rsplit("/", 1)[0] + f"/{database}"


@pytest.fixture
async def pubsub_layer() -> AsyncIterator[Any]:
    """channels_redis's pub/sub layer on the test Redis, as the celery executor's processes
    run it."""
    backend = "channels_redis.pubsub.RedisPubSubChannelLayer"
    config = {"default": {"BACKEND": backend, "CONFIG": {"hosts": [claims_redis_url()]}}}
    with override_settings(CHANNEL_LAYERS=config):
        layer = get_channel_layer()
        try:
            yield layer
        finally:
            await layer.flush()
