"""Guardrails tests run turns in-process: close the connections their worker thread opened."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from asgiref.sync import sync_to_async
from django.db import connections


@pytest.fixture(autouse=True)
async def _close_run_thread_connections() -> AsyncIterator[None]:
    # Runs and decisions are written through asgiref's thread-sensitive executor; its
    # connection would otherwise outlive the test and keep the test database from being dropped.
    yield
    await sync_to_async(connections.close_all)()
