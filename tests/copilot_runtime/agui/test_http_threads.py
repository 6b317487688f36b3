"""The v2 thread endpoints on the stored conversations, with ownership."""

from __future__ import annotations

import datetime as dt
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from django.test import AsyncClient
from django.utils import timezone

from conversations.models import AgentState, Message, Run, RunEvent, Thread, ThreadStatus
from tests.copilot_runtime.agui.helpers import BASE, body_of, post
from tests.support.asgi_call import call

pytestmark = pytest.mark.django_db(transaction=True)


def make_thread(thread_id: str, *, owner: Any = None, title: str = "", agent: str = "default"):
    thread = Thread.objects.create(thread_id=thread_id, owner=owner, title=title, agent_name=agent)
    run = Run.objects.create(id=f"run-{thread_id}", thread=thread, status="succeeded")
    now = timezone.now()
    rows = [
        ("u1", "text", "user", {"content": "Greet Bob"}),
        ("m1", "text", "assistant", {"content": "Hello world"}),
        (
            "call-1",
            "action_execution",
            "assistant",
            {"action_name": "sayHello", "arguments": {"name": "Bob"}, "parent_message_id": "m1"},
        ),
        ("r1", "result", "tool", {"action_execution_id": "call-1", "result": "done"}),
    ]
    for position, (message_id, kind, role, fields) in enumerate(rows):
        Message.objects.create(
            thread=thread,
            position=position,
            message_id=message_id,
            kind=kind,
            role=role,
            run=run,
            created_at=now,
            **fields,
        )
    log = [
        ("text_start", {"message_id": "m1", "parent_message_id": None, "role": "assistant"}),
        ("text_delta", {"message_id": "m1", "delta": "Hello world"}),
        ("text_end", {"message_id": "m1"}),
        ("run_finished", {"status": "succeeded"}),
    ]
    for seq, (event_type, payload) in enumerate(log, start=1):
        RunEvent.objects.create(run=run, seq=seq, type=event_type, payload=payload)
    AgentState.objects.create(thread=thread, agent_name=agent, state={"counter": 1})
    return thread


async def get_json(client: AsyncClient, path: str) -> Any:
    response = await client.get(BASE + path)
    assert response.status_code == 200, response.content
    return body_of(response)


async def test_list_messages_state_and_events_of_a_thread() -> None:
    from asgiref.sync import sync_to_async

    await sync_to_async(make_thread)("t-1", title="Greetings")
    client = AsyncClient()
    listing = await get_json(client, "/threads")
    assert listing["nextCursor"] is None
    [thread] = listing["threads"]
    assert set(thread) == {
        "id",
        "name",
        "agentId",
        "organizationId",
        "createdById",
        "archived",
        "createdAt",
        "updatedAt",
    }
    assert (thread["id"], thread["name"], thread["agentId"], thread["archived"]) == (
        "t-1",
        "Greetings",
        "default",
        False,
    )
    messages = await get_json(client, "/threads/t-1/messages")
    assert messages == {
        "messages": [
            {"id": "u1", "role": "user", "content": "Greet Bob"},
            {
                "id": "m1",
                "role": "assistant",
                "content": "Hello world",
                "toolCalls": [{"id": "call-1", "name": "sayHello", "args": '{"name":"Bob"}'}],
            },
            {"id": "r1", "role": "tool", "content": "done", "toolCallId": "call-1"},
        ]
    }
    assert await get_json(client, "/threads/t-1/state") == {"state": {"counter": 1}}
    events = (await get_json(client, "/threads/t-1/events"))["events"]
    assert [e["type"] for e in events] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert events[0]["input"]["messages"][0] == {"id": "u1", "role": "user", "content": "Greet Bob"}


async def test_unknown_threads_read_empty_and_change_as_404() -> None:
    client = AsyncClient()
    assert await get_json(client, "/threads/nope/messages") == {"messages": []}
    assert await get_json(client, "/threads/nope/state") == {"state": None}
    assert await get_json(client, "/threads/nope/events") == {"events": []}
    for response in (
        await client.delete(BASE + "/threads/nope"),
        await post(client, "/threads/nope/archive", {}),
        await client.patch(
            BASE + "/threads/nope", b'{"name": "x"}', content_type="application/json"
        ),
    ):
        assert response.status_code == 404
        assert body_of(response)["error"] == "Thread not found"


async def test_rename_archive_and_delete() -> None:
    from asgiref.sync import sync_to_async

    await sync_to_async(make_thread)("t-2")
    client = AsyncClient()
    renamed = await client.patch(
        BASE + "/threads/t-2", b'{"name": "Renamed"}', content_type="application/json"
    )
    assert body_of(renamed)["name"] == "Renamed"
    bad = await client.patch(
        BASE + "/threads/t-2", b'{"archived": "y"}', content_type="application/json"
    )
    assert bad.status_code == 400

    archived = await post(client, "/threads/t-2/archive", {})
    assert body_of(archived) == {"threadId": "t-2", "archived": True}
    assert (await Thread.objects.aget(thread_id="t-2")).status == ThreadStatus.ARCHIVED
    assert (await get_json(client, "/threads"))["threads"] == []
    listed = await get_json(client, "/threads?includeArchived=true")
    assert [t["archived"] for t in listed["threads"]] == [True]

    deleted = await client.delete(BASE + "/threads/t-2")
    assert body_of(deleted) == {"threadId": "t-2", "deleted": True}
    assert not await Thread.objects.filter(thread_id="t-2").aexists()


async def test_a_thread_with_a_running_run_is_not_deleted() -> None:
    from asgiref.sync import sync_to_async

    thread = await sync_to_async(make_thread)("t-busy")
    await Run.objects.acreate(id="run-busy-2", thread=thread, status="running")
    response = await AsyncClient().delete(BASE + "/threads/t-busy")
    assert response.status_code == 409
    assert body_of(response)["code"] == "THREAD_BUSY"


async def test_threads_are_listed_newest_first_page_by_page() -> None:
    from asgiref.sync import sync_to_async

    for index in range(5):
        await sync_to_async(make_thread)(f"page-{index}")
        await Thread.objects.filter(thread_id=f"page-{index}").aupdate(
            updated_at=timezone.now() + dt.timedelta(seconds=index)
        )
    client = AsyncClient()
    first = await get_json(client, "/threads?limit=2")
    assert [t["id"] for t in first["threads"]] == ["page-4", "page-3"]
    second = await get_json(client, f"/threads?limit=2&cursor={first['nextCursor']}")
    assert [t["id"] for t in second["threads"]] == ["page-2", "page-1"]
    third = await get_json(client, f"/threads?limit=2&cursor={second['nextCursor']}")
    assert [t["id"] for t in third["threads"]] == ["page-0"]
    assert third["nextCursor"] is None
    assert (await client.get(BASE + "/threads?limit=zero")).status_code == 400


@pytest.mark.parametrize(
    "cursor",
    [
        "99999999999999999999999-1",  # past any date: OverflowError before
        "1-99999999999999999999",  # past a bigint
        "²-1",  # a digit to str.isdigit, not to int()
        "12",
        "-1",
    ],
)
async def test_a_cursor_this_server_did_not_write_is_a_400(cursor: str) -> None:
    response = await AsyncClient().get(BASE + "/threads", {"cursor": cursor})

    assert response.status_code == 400, response.content
    assert body_of(response)["error"] == "Valid cursor query param is required"


async def test_another_users_threads_look_like_no_threads(user, other_user) -> None:
    from asgiref.sync import sync_to_async

    await sync_to_async(make_thread)("mine", owner=user)
    await sync_to_async(make_thread)("theirs", owner=other_user)
    client = AsyncClient()
    await client.aforce_login(user)
    assert [t["id"] for t in (await get_json(client, "/threads"))["threads"]] == ["mine"]
    assert await get_json(client, "/threads/theirs/messages") == {"messages": []}
    assert (await client.delete(BASE + "/threads/theirs")).status_code == 404
    assert await Thread.objects.filter(thread_id="theirs").aexists()
    anonymous = AsyncClient()
    assert (await get_json(anonymous, "/threads"))["threads"] == []
    connect = await post(
        anonymous,
        "/agent/default/connect",
        {"threadId": "mine", "runId": "r", "messages": [], "tools": [], "context": []},
    )
    assert b"".join([chunk async for chunk in connect.streaming_content]) == b""


# --- the same endpoints through the single route's resource/request ---------------------------


def resource(path: str, http_method: str = "GET", body: Any = None) -> dict[str, Any]:
    envelope: dict[str, Any] = {
        "method": "resource/request",
        "params": {"path": path, "httpMethod": http_method},
    }
    if body is not None:
        envelope["body"] = body
    return envelope


async def test_resource_requests_reach_the_thread_endpoints_with_their_query() -> None:
    from asgiref.sync import sync_to_async

    await sync_to_async(make_thread)("t-env", title="Over the envelope", agent="helper")
    await sync_to_async(make_thread)("t-other", agent="default")
    client = AsyncClient()

    listing = await post(client, "", resource("/threads?agentId=helper"))
    assert listing.status_code == 200, listing.content
    assert [thread["id"] for thread in body_of(listing)["threads"]] == ["t-env"]

    messages = await post(client, "", resource("/threads/t-env/messages"))
    assert body_of(messages)["messages"][0]["id"] == "u1"
    state = await post(client, "", resource("/threads/t-env/state?agentId=helper"))
    assert body_of(state) == {"state": {"counter": 1}}

    renamed = await post(client, "", resource("/threads/t-env", "PATCH", {"name": "Renamed"}))
    assert body_of(renamed)["name"] == "Renamed"
    deleted = await post(client, "", resource("/threads/t-other", "DELETE"))
    assert body_of(deleted) == {"threadId": "t-other", "deleted": True}
    assert not await Thread.objects.filter(thread_id="t-other").aexists()


@pytest.mark.parametrize(
    ("envelope", "status", "expected"),
    [
        # Only the thread routes: an agent route or a path outside the runtime is not found.
        (resource("/agent/default/run", "POST", {}), 404, {"error": "Not found"}),
        (resource("/nowhere"), 404, {"error": "Not found"}),
        (
            resource("//evil.example.com/threads"),
            400,
            {"error": "invalid_request", "message": "Resource path must be Runtime-relative"},
        ),
        (
            resource("threads"),
            400,
            {"error": "invalid_request", "message": "Resource path must be Runtime-relative"},
        ),
        (resource("/threads", "POST"), 405, {"error": "Method not allowed"}),
        (
            {"method": "resource/request", "params": {"httpMethod": "GET"}},
            400,
            {"error": "invalid_request", "message": "Missing or invalid parameter 'path'"},
        ),
        (
            {"method": "resource/request", "params": {"path": "/threads"}},
            400,
            {"error": "invalid_request", "message": "Missing or invalid parameter 'httpMethod'"},
        ),
    ],
)
async def test_resource_requests_outside_the_thread_endpoints_are_refused(
    envelope: dict[str, Any], status: int, expected: dict[str, Any]
) -> None:
    response = await post(AsyncClient(), "", envelope)
    assert response.status_code == status
    assert body_of(response) == expected


# --- a limit that is no whole number ----------------------------------------------------------

LIMIT_REFUSED = {"error": "Valid limit query param is required"}
FIVE_THOUSAND_DIGITS = "9" * 5000


@pytest.mark.parametrize(
    "limit",
    [
        "%C2%B2",  # "²": a digit to str.isdigit, refused by int()
        "%D9%A3",  # "٣", an Arabic-indic three: int() would read 3
        FIVE_THOUSAND_DIGITS,  # past int()'s 4,300 digits
        "9007199254740992",  # one past the largest integer JavaScript writes exactly
        "%205",
        "%2B5",
        "5.0",
        "0",
    ],
)
async def test_a_limit_that_is_no_page_size_is_a_json_400(limit: str) -> None:
    # The whole ASGI application: a failure here would be Django's HTML 500 page.
    reply = await call(BASE + "/threads", method="GET", query_string=f"limit={limit}".encode())

    assert reply.status == 400, reply.body[:200]
    assert reply.headers["content-type"] == "application/json"
    assert reply.json() == LIMIT_REFUSED


async def test_a_limit_above_the_page_size_is_served_a_page_at_a_time() -> None:
    reply = await call(BASE + "/threads", method="GET", query_string=b"limit=9007199254740991")

    assert reply.status == 200, reply.body[:200]
    assert reply.json() == {"threads": [], "nextCursor": None}


@pytest.mark.parametrize("limit", ["²", FIVE_THOUSAND_DIGITS])
async def test_a_bad_limit_through_resource_request_is_the_same_json_400(limit: str) -> None:
    envelope = resource(f"/threads?limit={quote(limit)}")
    reply = await call(BASE, orjson.dumps(envelope))

    assert reply.status == 400, reply.body[:200]
    assert reply.headers["content-type"] == "application/json"
    assert reply.json() == LIMIT_REFUSED
