"""The adapters' tests: the model client's own (test_http1.py) run on asyncio's event loop and
on uvloop's, which the web processes and the Celery worker run on (their transports differ:
uvloop's are not ``asyncio.Transport`` subclasses)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

import pytest
import uvloop

BOTH_LOOPS = ("test_http1",)


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    module = getattr(item, "module", None)
    if module is not None and module.__name__.rpartition(".")[2] in BOTH_LOOPS:
        return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}
