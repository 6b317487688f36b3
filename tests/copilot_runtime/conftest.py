"""Fixtures shared by the runtime's tests."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis
from celery import Celery
from celery._state import get_current_app
from django.test import override_settings

from conversations.store import turn_store
from conversations.store.pg.pools import POOLS
from conversations.store.pg.store import PgTurnStore
from copilot_runtime import fastlane
from copilot_runtime.conf import runtime_settings as runtime_settings_cached
from tests.support.generate_e2e import runtime_settings
from tests.support.redis_broker import redis_test_url

# A version of a library no test lane was run with (copilot_runtime/fastlane).
UNTESTED_VERSION = "999.0.0"


@pytest.fixture
def untested_version(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """``untested_version("kombu")``: from then on the process sees kombu 999.0.0 installed,
    as a host with a release the fast lane was not tested with would; its lane closes."""
    real = fastlane.installed_version

    def pin(distribution: str) -> None:
        def installed(name: str) -> str | None:
            return UNTESTED_VERSION if name == distribution else real(name)

        monkeypatch.setattr(fastlane, "installed_version", installed)

    return pin


@pytest.fixture
def redis_app() -> Iterator[Celery]:
    """A Celery app on the test Redis, its default queue a name of its own (no flushing)."""
    app = Celery("publish-test", broker=redis_test_url(), set_as_current=False)
    app.conf.task_default_queue = f"publish-test-{uuid.uuid4()}"
    client = redis.Redis.from_url(redis_test_url())
    try:
        yield app
    finally:
        client.delete(app.conf.task_default_queue, "_kombu.binding.celery")
        client.close()
        app.close()


@pytest.fixture
def current_redis_app(redis_app: Celery) -> Iterator[Celery]:
    """``redis_app``, the current app of this thread (the event loop's, which queues runs)."""
    previous = get_current_app()
    redis_app.set_current()
    try:
        yield redis_app
    finally:
        previous.set_current()


@pytest.fixture
def model_on_the_fake(fake_upstream: Any) -> Iterator[None]:
    """Turns executed in the test process ask the fake upstream (no retries)."""
    with override_settings(COPILOT_RUNTIME=runtime_settings(fake_upstream.base_url)):
        yield


@pytest.fixture
async def pg_turn_store(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """The raw-SQL store (PostgreSQL) for this test's turns. tests/conftest.py makes the
    in-process store the ORM one; a test whose rows are committed (``transaction=True``) can
    use the store's own connections."""
    monkeypatch.setenv("COPILOT_RUNTIME_TURN_STORE", "auto")
    runtime_settings_cached.cache_clear()
    assert isinstance(turn_store(), PgTurnStore)
    yield
    await POOLS.close_all()
    monkeypatch.undo()
    runtime_settings_cached.cache_clear()
