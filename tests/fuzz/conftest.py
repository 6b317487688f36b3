"""The fuzz suite's setting: the whole ASGI application in-process on the test database, the
fake upstream as its model, anonymous callers allowed, the inline executor.

``FUZZ_EXAMPLES`` sets how many requests each test generates (default 100: the suite stays
a minute or so in ``make test``); examples are derandomized, so a run is reproducible.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, settings

settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "100")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@pytest.fixture
def runtime(fake_upstream: Any) -> Iterator[Any]:
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
            "EVENT_FLUSH_MS": 5,
            "ACTIONS": ["tests.support.actions.server_add"],
        }
    ):
        yield fake_upstream
