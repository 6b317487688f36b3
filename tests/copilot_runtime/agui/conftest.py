"""Fixtures for the v2 (AG-UI) tests: the runtime on the fake upstream, and SSE helpers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
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
