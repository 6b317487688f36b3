"""Fixtures for the v2 (AG-UI) tests: the runtime on the fake upstream, and SSE helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import override_settings
from pytest_django.fixtures import Settings

FAST_PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Settings) -> None:
    settings.PASSWORD_HASHERS = FAST_PASSWORD_HASHERS


@pytest.fixture
def runtime_on_fake(fake_upstream: Any) -> Iterator[dict[str, Any]]:
    conf = {
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": fake_upstream.base_url,
        "OPENAI_MAX_RETRIES": 0,
        "ACTIONS": ["tests.support.actions.server_add"],
        "EVENT_FLUSH_MS": 5,
    }
    with override_settings(COPILOT_RUNTIME=conf):
        yield conf


@pytest.fixture
async def _close_run_thread_connections() -> AsyncIterator[None]:
    # Runs write through asgiref's thread-sensitive executor; its connection would otherwise
    # outlive the test and keep the test database from being dropped.
    yield
    await sync_to_async(connections.close_all)()
