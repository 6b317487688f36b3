"""Holding load: many concurrent conversations on one web process, nothing failed, nothing lost.

Bounded (seconds, not minutes) and asserting correctness, never speed (speed lives in the
benchmark): every request answered with its whole reply, and every reply stored whole.

- PostgreSQL, one uvicorn process: 300 users streaming at once, replies of 100 tokens 20 ms
  apart (2-second streams), each user continuing its own thread for two turns with the whole
  history re-sent. A connection is held only for a turn's statements, so 300 streams share a
  pool of 10.
- The embedded default (SQLite), one uvicorn process: 50 users, three turns each.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from conversations.models import Message, Run, RunStatus
from tests.e2e.conftest import ASGI_APPLICATION, UVICORN
from tests.support.generate_e2e import deterministic_tokens, server_env

# Serial (scripts/test.sh's lane, at a priority above the niced parallel run): 300 streams
# at once want the whole machine.
pytestmark = [pytest.mark.e2e, pytest.mark.serial]


@dataclass
class Reply:
    run_id: str
    thread_id: str
    status: int
    ended_with: str
    message_id: str
    text: str


async def _run(
    session: aiohttp.ClientSession, url: str, thread_id: str, messages: list[dict[str, Any]]
) -> Reply:
    run_id = str(uuid.uuid4())
    body = {
        "threadId": thread_id,
        "runId": run_id,
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "state": {},
        "messages": messages,
    }
    async with session.post(
        f"{url}/api/copilotkit/agent/default/run",
        data=orjson.dumps(body),
        headers={"content-type": "application/json", "accept": "text/event-stream"},
    ) as response:
        parts: list[str] = []
        message_id = ""
        ended_with = ""
        async for raw in response.content:
            if not raw.startswith(b"data: "):
                continue
            event = orjson.loads(raw[6:])
            kind = event["type"]
            if kind == "TEXT_MESSAGE_START":
                message_id = event["messageId"]
            elif kind == "TEXT_MESSAGE_CONTENT":
                parts.append(event["delta"])
            elif kind in ("RUN_FINISHED", "RUN_ERROR"):
                ended_with = kind if kind == "RUN_FINISHED" else f"RUN_ERROR {event}"
        return Reply(run_id, thread_id, response.status, ended_with, message_id, "".join(parts))


async def _converse(
    session: aiohttp.ClientSession, url: str, user: int, turns: int, directive: dict[str, Any]
) -> list[Reply]:
    thread_id = f"load-{user}-{uuid.uuid4()}"
    history: list[dict[str, Any]] = []
    replies = []
    for turn in range(turns):
        history.append(
            {
                "id": str(uuid.uuid4()),
                "role": "user",
                "content": f"turn {turn}\nFAKE: {orjson.dumps(directive).decode()}",
            }
        )
        reply = await _run(session, url, thread_id, list(history))
        replies.append(reply)
        if reply.ended_with != "RUN_FINISHED":
            break
        history.append({"id": reply.message_id, "role": "assistant", "content": reply.text})
    return replies


async def _load(url: str, *, users: int, turns: int, directive: dict[str, Any]) -> list[Reply]:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        conversations = await asyncio.gather(
            *(_converse(session, url, user, turns, directive) for user in range(users))
        )
    return [reply for replies in conversations for reply in replies]


def _check_answers(replies: list[Reply], *, expected: int, tokens: int) -> None:
    failed = [r for r in replies if r.status != 200 or r.ended_with != "RUN_FINISHED"]
    assert not failed, f"{len(failed)} of {len(replies)} failed, e.g. {failed[:3]}"
    assert len(replies) == expected
    short = [r for r in replies if r.text != deterministic_tokens(tokens)]
    assert not short, f"{len(short)} replies were not whole, e.g. {short[:1]}"


def test_300_concurrent_paced_streams_on_one_process_lose_nothing(
    live_server_factory: Callable[..., Any], fake_upstream: Any
) -> None:
    users, turns, tokens = 300, 2, 100
    server = live_server_factory(env=server_env(fake_upstream.base_url))

    replies = asyncio.run(
        _load(server.url, users=users, turns=turns, directive={"tokens": tokens, "delay_ms": 20})
    )

    _check_answers(replies, expected=users * turns, tokens=tokens)
    runs = {r.run_id: r for r in replies}
    stored = Run.objects.filter(pk__in=list(runs)).values_list("pk", "status")
    assert sorted(status for _, status in stored) == [RunStatus.SUCCEEDED] * len(runs)
    answers = dict(
        Message.objects.filter(
            message_id__in=[r.message_id for r in replies], role="assistant"
        ).values_list("message_id", "content")
    )
    assert answers == {r.message_id: r.text for r in replies}
    # Each thread holds both turns' questions and answers, in order.
    per_thread = Message.objects.filter(thread__thread_id=replies[0].thread_id).order_by("position")
    assert [m.role for m in per_thread] == ["user", "assistant", "user", "assistant"]


def test_50_concurrent_users_on_the_embedded_default_see_no_error(
    served_process_factory: Callable[..., Any],
    base_subprocess_env: dict[str, str],
    unused_tcp_port_factory: Callable[[], int],
    fake_upstream: Any,
    tmp_path: Path,
) -> None:
    users, turns, tokens = 50, 3, 30
    database = tmp_path / "embedded.sqlite3"
    env = {
        **base_subprocess_env,
        **server_env(fake_upstream.base_url),
        "DATABASE_URL": f"sqlite:///{database}",
    }
    port = unused_tcp_port_factory()
    # As `make run` serves it: migrate the fresh file, then one uvicorn process.
    command = (
        f"{Path(UVICORN).parent / 'python'} manage.py migrate --noinput -v0 && exec {UVICORN}"
        f" {ASGI_APPLICATION} --host 127.0.0.1 --port {port} --loop uvloop --http httptools"
        " --no-access-log --log-level warning"
    )
    server = served_process_factory(["bash", "-c", command], port=port, env=env, timeout=60)

    replies = asyncio.run(_load(server.url, users=users, turns=turns, directive={"tokens": tokens}))

    _check_answers(replies, expected=users * turns, tokens=tokens)
    with sqlite3.connect(database) as db:
        statuses = db.execute("SELECT status, count(*) FROM conversations_run GROUP BY status")
        assert dict(statuses.fetchall()) == {"succeeded": users * turns}
        stored = dict(
            db.execute(
                "SELECT message_id, content FROM conversations_message WHERE role = 'assistant'"
            ).fetchall()
        )
    assert stored == {r.message_id: r.text for r in replies}
    assert "database is locked" not in server.stderr_text()
