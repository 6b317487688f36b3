"""What every answer to a fuzzed request must satisfy, and what must hold after a batch."""

from __future__ import annotations

import asyncio
import time
import uuid

import orjson
from hypothesis import event

from conversations.models import Run, RunStatus
from tests.support.asgi_call import Reply, call

_ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING)
# What a leaked traceback or a server path looks like in a body.
_LEAKS = (b"Traceback (most recent call last)", b'File "/', b"site-packages", b'.py", line')


# The one documented 5xx a client can cause: transcription asked of a runtime without it
# (the TypeScript runtime answers the same).
_DELIBERATE = (503, b'"error":"service_not_configured"')


def check_reply(reply: Reply, what: str) -> None:
    event(f"HTTP {reply.status}")  # pytest --hypothesis-show-statistics shows the spread
    deliberate = reply.status == _DELIBERATE[0] and _DELIBERATE[1] in reply.body
    assert reply.status < 500 or deliberate, f"{what}: HTTP {reply.status}: {reply.body[:500]!r}"
    for leak in _LEAKS:
        assert leak not in reply.body, f"{what}: the answer leaks {leak!r}: {reply.body[:800]!r}"


async def check_no_run_left_open(*, wait_seconds: float = 20.0) -> None:
    """Every run any request started has ended (runs stream to their end within the call)."""
    deadline = time.monotonic() + wait_seconds
    while True:
        open_runs = [
            (run.pk, run.status)
            async for run in Run.objects.filter(status__in=_ACTIVE).only("pk", "status")
        ]
        if not open_runs:
            return
        assert time.monotonic() < deadline, f"runs left open: {open_runs}"
        await asyncio.sleep(0.1)


async def check_still_serving(*, thread_id: str | None = None) -> None:
    """A normal v2 run answers and finishes (on ``thread_id``, else a fresh thread)."""
    body = {
        "threadId": thread_id or f"after-fuzz-{uuid.uuid4()}",
        "runId": str(uuid.uuid4()),
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": "Still there?"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    reply = await call(
        "/api/copilotkit/agent/default/run",
        orjson.dumps(body),
        headers={"accept": "text/event-stream"},
    )
    assert reply.status == 200, reply.body[:500]
    types = [
        orjson.loads(line[6:])["type"]
        for line in reply.body.split(b"\n")
        if line.startswith(b"data: ")
    ]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED", types
