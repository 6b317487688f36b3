"""Fixtures for the HTTP tests of the runtime endpoint."""

from __future__ import annotations

import pytest
from pytest_django.fixtures import Settings

FAST_PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Settings) -> None:
    """Users are created in most tests here; the default hasher costs ~0.2 s a user."""
    settings.PASSWORD_HASHERS = FAST_PASSWORD_HASHERS
