"""Helpers shared by the Celery executor's end-to-end tests (fixtures are in conftest.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from django.test import override_settings

from conversations.models import Run, RunEvent
from copilot_runtime.engine.relay import follow_run

T = TypeVar("T")
LogEntry = tuple[int, str, dict[str, Any]]


def fake(directive: dict[str, Any]) -> str:
    """A user message scripting the fake upstream's reply to it."""
    return "FAKE: " + json.dumps(directive)


def log_entries(run_id: str) -> list[LogEntry]:
    """The run's event log as (seq, type, payload), in order."""
    return [
        (event.seq, event.type, event.payload)
        for event in RunEvent.objects.filter(run_id=run_id).order_by("seq")
    ]


def run_of_thread(thread_id: str) -> Run | None:
    return Run.objects.filter(thread__thread_id=thread_id).order_by("-created_at").first()


@contextlib.contextmanager
def redis_channel_layer(redis_url: str) -> Iterator[None]:
    """This (test) process's channel layer on ``redis_url``, as a web process has it."""
    layers = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [redis_url]},
        }
    }
    with override_settings(CHANNEL_LAYERS=layers):
        yield


def follow_in_process(run_id: str, *, after_seq: int = 0, timeout: float = 30) -> list[LogEntry]:
    """Follow a run from this process (through the current channel layer and the log), as a
    second web process would: every event until ``run_finished``."""

    async def follow() -> list[LogEntry]:
        from channels.layers import get_channel_layer

        seen: list[LogEntry] = []
        try:
            async with asyncio.timeout(timeout):
                async for event in follow_run(run_id, after_seq=after_seq):
                    seen.append((event.seq, event.type, event.payload))
        finally:
            # The pub/sub layer's flush only closes its connections (its messages live nowhere).
            await get_channel_layer().flush()
        return seen

    return asyncio.run(follow())


@contextlib.contextmanager
def in_background(call: Callable[[], T]) -> Iterator[Future[T]]:
    """Run a blocking ``call`` (a Node client) in a thread while the test goes on."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool.submit(call)
