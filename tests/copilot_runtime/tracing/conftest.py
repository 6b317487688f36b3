"""Runs executed in-process write through asgiref's thread: close its connections after."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from asgiref.sync import sync_to_async
from django.db import connections


@pytest.fixture(autouse=True)
async def _close_run_thread_connections() -> AsyncIterator[None]:
    yield
    await sync_to_async(connections.close_all)()
