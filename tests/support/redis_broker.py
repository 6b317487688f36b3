"""The suite's Redis (started by scripts/test.sh) as a Celery broker for in-process tests."""

from __future__ import annotations

import os

import pytest


def redis_test_url() -> str:
    url = os.environ.get("TEST_REDIS_URL")
    if not url:
        pytest.fail("TEST_REDIS_URL is not set: run the suite with scripts/test.sh (make test)")
    return url
