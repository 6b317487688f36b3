"""Helpers shared by the Celery executor's end-to-end tests (fixtures are in conftest.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import httpx
import orjson
from django.test import override_settings

from benchmarks.response_reader import MultipartMixedParser
from conversations.models import Run, RunEvent
from copilot_runtime.runs.relay import follow_run
from tests.e2e.js_client import JS_CLIENT_VERSIONS
from tests.support.client_capture import captured_generate_request
from tests.support.generate_e2e import GRAPHQL_PATH, generate_data, text_input

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


def streamed_reply(body: bytes) -> tuple[str, str | None, str]:
    """(run id, response status code, text) from a multipart ``generateCopilotResponse``."""
    run_id, status, text = "", None, []
    for part in MultipartMixedParser().feed(body):
        payload = orjson.loads(part)
        if "data" in payload:
            run_id = payload["data"]["generateCopilotResponse"]["runId"]
        for entry in payload.get("incremental", []):
            if entry["path"][-2:-1] == ["content"]:
                text.extend(entry["items"])
            elif entry["path"] == ["generateCopilotResponse"] and "status" in entry["data"]:
                status = entry["data"]["status"]["code"]
    return run_id, status, "".join(text)


def converse_v1(
    url: str, *, thread_id: str, directive: dict[str, Any]
) -> tuple[str, str | None, str]:
    """One v1 turn as the real client sends it (its captured document and headers, sent by
    httpx: many Node processes at once would cost more than a test on two cores), its user
    message asking the fake upstream for ``directive``: (run id, status code, text)."""
    request = captured_generate_request(JS_CLIENT_VERSIONS[0])
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", fake(directive))])
    response = httpx.post(
        url + GRAPHQL_PATH,
        content=request.body(data),
        headers=request.request_headers(),
        timeout=60,
    )
    assert response.status_code == 200
    return streamed_reply(response.content)
