"""Client thread ids are scoped to their owner, through the whole ASGI application.

Two callers using one ``threadId`` (v2 run, the envelope's ``agent/run``, a v1
``generateCopilotResponse``) each get a thread of their own, and neither sees the other's
messages or state. Every surface that looks a thread up by its client id answers another
caller's thread byte for byte as it answers an id nobody uses: asked before the thread exists
and after, the answers are the same. A busy thread refuses its own owner's next run only.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from conversations.models import AgentState, Run, RunStatus, Thread
from copilot_runtime.auth import do_issue_token
from tests.support.agent_turns import run_ended
from tests.support.asgi_call import Reply, call

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("_close_run_thread_connections"),
]

ENDPOINT = "/api/copilotkit"
SSE = {"accept": "text/event-stream"}
LOAD_AGENT_STATE = """
query loadAgentState($data: LoadAgentStateInput!) {
  loadAgentState(data: $data) { threadId threadExists state messages }
}
"""


@pytest.fixture
def runtime(fake_upstream: Any) -> Any:
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
            "EVENT_FLUSH_MS": 5,
        }
    ):
        yield fake_upstream


@pytest.fixture
async def callers(user: Any, other_user: Any) -> dict[str, dict[str, str]]:
    """Each caller's headers: two users by their API tokens, and an anonymous caller."""
    headers: dict[str, dict[str, str]] = {"anonymous": {}}
    for name, who in (("alice", user), ("bob", other_user)):
        _token, raw = await sync_to_async(do_issue_token)(user=who, name=name)
        headers[name] = {"authorization": f"Bearer {raw}"}
    return headers


def fake(directive: dict[str, Any]) -> str:
    return "FAKE: " + orjson.dumps(directive).decode()


def v2_body(thread_id: str, content: str, **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": str(uuid.uuid4()),
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "state": {},
        "messages": [{"id": f"u-{uuid.uuid4()}", "role": "user", "content": content}],
        **extra,
    }


def v1_body(thread_id: str, content: str) -> bytes:
    """The 1.10.6 client's mutation for a first message saying ``content``."""
    from benchmarks.client_request import request_variables
    from copilot_runtime.graphql.fastpath.documents import client_mutation_printed

    variables = request_variables(thread_id=thread_id, tokens=1)
    variables["data"]["messages"][0]["textMessage"]["content"] = content
    return orjson.dumps(
        {
            "query": client_mutation_printed(),
            "operationName": "generateCopilotResponse",
            "variables": variables,
        }
    )


async def run_turn(protocol: str, thread_id: str, text: str, headers: dict[str, str]) -> Reply:
    """One turn saying ``text`` back, to its end (the run's rows written)."""
    content = fake({"text": text})
    earlier = {run_id async for run_id in Run.objects.values_list("pk", flat=True)}
    if protocol == "v1":
        reply = await call(
            ENDPOINT,
            v1_body(thread_id, content),
            headers={**headers, "accept": "multipart/mixed, application/json"},
        )
    else:
        body = v2_body(thread_id, content)
        path, payload = f"{ENDPOINT}/agent/default/run", body
        if protocol == "envelope":
            path = ENDPOINT
            payload = {"method": "agent/run", "params": {"agentId": "default"}, "body": body}
        reply = await call(path, orjson.dumps(payload), headers={**headers, **SSE})
    assert reply.status == 200, reply.body
    assert b"error" not in reply.body.lower(), reply.body
    async for run_id in Run.objects.exclude(pk__in=earlier).values_list("pk", flat=True):
        await run_ended(run_id)
    return reply


async def answers(thread_id: str, headers: dict[str, str]) -> list[tuple[Any, ...]]:
    """What a caller is answered, as (request, status, content type, body), by every surface
    that looks a thread up by its client id."""
    path = f"{ENDPOINT}/threads/{thread_id}"
    connect = v2_body(thread_id, "x", messages=[])
    requests: list[tuple[str, str, bytes, bytes]] = [
        ("GET", f"{path}/messages", b"", b""),
        ("GET", f"{path}/state", b"agentId=default", b""),
        ("GET", f"{path}/events", b"", b""),
        ("GET", f"{ENDPOINT}/threads", b"", b""),
        ("POST", f"{ENDPOINT}/agent/default/connect", b"", orjson.dumps(connect)),
        ("POST", f"{ENDPOINT}/agent/default/stop/{thread_id}", b"", b"{}"),
        (
            "POST",
            ENDPOINT,
            b"",
            orjson.dumps(
                {"method": "agent/connect", "params": {"agentId": "default"}, "body": connect}
            ),
        ),
        (
            "POST",
            ENDPOINT,
            b"",
            orjson.dumps(
                {"method": "agent/stop", "params": {"agentId": "default", "threadId": thread_id}}
            ),
        ),
        (
            "POST",
            ENDPOINT,
            b"",
            orjson.dumps(
                {
                    "method": "resource/request",
                    "params": {"path": f"/threads/{thread_id}/messages", "httpMethod": "GET"},
                }
            ),
        ),
        (
            "POST",
            ENDPOINT,
            b"",
            orjson.dumps(
                {
                    "query": LOAD_AGENT_STATE,
                    "variables": {"data": {"threadId": thread_id, "agentName": "default"}},
                }
            ),
        ),
        # The changes last: refused alike, they change nothing.
        ("PATCH", path, b"", orjson.dumps({"name": "taken over"})),
        ("POST", f"{path}/archive", b"", b"{}"),
        ("DELETE", path, b"", b""),
    ]
    answered = []
    for method, target, query, body in requests:
        reply = await call(
            target, body, method=method, query_string=query, headers={**headers, **SSE}
        )
        answered.append(
            (method, target, query, reply.status, reply.headers.get("content-type"), reply.body)
        )
    return answered


@pytest.mark.parametrize("protocol", ["v2", "envelope", "v1"])
async def test_two_callers_using_one_thread_id_each_get_a_thread_of_their_own(
    runtime: Any, callers: dict[str, dict[str, str]], user: Any, protocol: str
) -> None:
    thread_id = f"shared-{protocol}"
    await run_turn(protocol, thread_id, "Alice's secret plan", callers["alice"])
    thread = await Thread.objects.aget(thread_id=thread_id, owner=user)
    await AgentState.objects.acreate(thread=thread, agent_name="default", state={"alice": 1})

    bobs = await run_turn(protocol, thread_id, "Bob's own answer", callers["bob"])
    anonymous = await run_turn(protocol, thread_id, "Anyone's answer", callers["anonymous"])

    # (v1 streams the reply's text in pieces: what was stored is read back below.)
    assert b"Alice" not in bobs.body
    assert b"Alice" not in anonymous.body
    assert await Thread.objects.filter(thread_id=thread_id).acount() == 3
    for name, own, others in (
        ("alice", b"Alice's secret plan", (b"Bob's own answer", b"Anyone's answer")),
        ("bob", b"Bob's own answer", (b"Alice", b"Anyone's answer", b'"alice"')),
        ("anonymous", b"Anyone's answer", (b"Alice", b"Bob's own answer", b'"alice"')),
    ):
        seen = b"\n".join(answer[-1] for answer in await answers(thread_id, callers[name]))
        assert own in seen, name
        assert not [other for other in others if other in seen], (name, seen)


@pytest.mark.parametrize(
    ("holder", "asker"), [("alice", "bob"), ("alice", "anonymous"), ("anonymous", "alice")]
)
async def test_another_callers_thread_is_answered_byte_for_byte_like_an_unknown_one(
    runtime: Any, callers: dict[str, dict[str, str]], holder: str, asker: str
) -> None:
    before = await answers("probe", callers[asker])

    await run_turn("v2", "probe", "the holder's words", callers[holder])
    thread = await Thread.objects.aget(thread_id="probe")
    await AgentState.objects.acreate(thread=thread, agent_name="default", state={"held": True})
    # And a run in progress on it, which the asker can neither see nor stop.
    await Run.objects.acreate(id="probe-active", thread=thread, status=RunStatus.RUNNING)
    after = await answers("probe", callers[asker])

    assert after == before
    assert (await Run.objects.aget(pk="probe-active")).status == RunStatus.RUNNING
    assert await Thread.objects.filter(thread_id="probe").acount() == 1
    assert (await Thread.objects.aget(thread_id="probe")).title != "taken over"
    # And a run on the id starts the asker's own thread, as on any id nobody uses.
    await run_turn("v2", "probe", "the asker's words", callers[asker])
    assert await Thread.objects.filter(thread_id="probe").acount() == 2


async def test_a_busy_thread_refuses_its_own_owners_next_run_only(
    runtime: Any, callers: dict[str, dict[str, str]]
) -> None:
    run_path = f"{ENDPOINT}/agent/default/run"
    hanging = v2_body("busy", fake({"hang": True}))
    first = asyncio.ensure_future(
        call(run_path, orjson.dumps(hanging), headers={**callers["alice"], **SSE})
    )
    for _ in range(400):
        if await Run.objects.filter(pk=hanging["runId"], status=RunStatus.RUNNING).aexists():
            break
        await asyncio.sleep(0.025)

    again = await call(
        run_path, orjson.dumps(v2_body("busy", "more")), headers={**callers["alice"], **SSE}
    )
    bobs_stop = await call(
        f"{ENDPOINT}/agent/default/stop/busy", b"{}", headers={**callers["bob"], **SSE}
    )
    await run_turn("v2", "busy", "Bob is not kept waiting", callers["bob"])
    stop = await call(
        f"{ENDPOINT}/agent/default/stop/busy", b"{}", headers={**callers["alice"], **SSE}
    )
    await asyncio.wait_for(first, 30)

    assert again.status == 409 and again.json()["code"] == "THREAD_BUSY"
    assert bobs_stop.json() == {"stopped": False, "message": "No active run for thread 'busy'."}
    assert stop.json()["stopped"] is True
    assert (await run_ended(hanging["runId"])).status == RunStatus.CANCELLED
