"""The hot endpoints' front (``copilot_runtime/endpoints/front.py``), driven as ASGI.

The v1 mutation and the v2 run are answered without Django's handler, with the same auth,
CSRF, CORS and body rules; everything else reaches Django with its body intact.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import uuid
from typing import Any

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.test import override_settings

from conversations.models import Message, Run, Thread
from copilot_runtime.auth import do_issue_token, do_revoke_token
from copilot_runtime.endpoints import front
from copilot_runtime.endpoints.caller_cache import caller_cache_clear
from copilot_runtime.endpoints.front import RuntimeFront
from copilot_runtime.http.body import BAD_LENGTH, TOO_DEEP
from copilot_runtime.runs.execute import RUN_TIME_LIMIT_CODE
from tests.support.asgi_call import Reply, call

pytestmark = pytest.mark.django_db(transaction=True)

RUN_PATH = "/api/copilotkit/agent/default/run"


def run_body(**overrides: Any) -> bytes:
    body = {
        "threadId": overrides.pop("threadId", f"front-{uuid.uuid4()}"),
        "runId": overrides.pop("runId", str(uuid.uuid4())),
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "state": {},
        "messages": overrides.pop(
            "messages", [{"id": str(uuid.uuid4()), "role": "user", "content": "Hi"}]
        ),
        **overrides,
    }
    return orjson.dumps(body)


@pytest.fixture
def runtime(fake_upstream: Any) -> Any:
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
            "MAX_BODY_BYTES": 4096,
            "CORS_ALLOWED_ORIGINS": ["http://localhost:3000"],
        }
    ):
        yield fake_upstream


def sse_types(reply: Reply) -> list[str]:
    return [
        orjson.loads(line[6:])["type"]
        for line in reply.body.split(b"\n")
        if line.startswith(b"data: ")
    ]


# --- bodies ------------------------------------------------------------------------------------


async def test_a_declared_oversized_body_is_refused_before_it_is_read(runtime: Any) -> None:
    reply = await call(RUN_PATH, b"x" * 10, declared_length=10_000_000)

    assert reply.status == 413
    assert reply.json()["error"] == "payload_too_large"
    assert reply.received == []  # type: ignore[attr-defined]


async def test_any_runtime_route_refuses_a_declared_oversized_body(runtime: Any) -> None:
    reply = await call("/api/copilotkit/threads", b"{}", declared_length=10_000_000)

    assert reply.status == 413
    assert reply.received == []  # type: ignore[attr-defined]


def with_content_length(raw: bytes | None) -> Any:
    """The application, called with ``raw`` as the request's Content-Length (the bytes on the
    wire: a header is read as latin-1, so "²" is the one byte 0xB2), or with none at all (a
    chunked body)."""
    from copilot_runtime.site.asgi import application

    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        if raw is not None:
            headers.append((b"content-length", raw))
        await application({**scope, "headers": headers}, receive, send)

    return app


async def test_reading_stops_at_the_limit(runtime: Any) -> None:
    # No Content-Length: the body is read chunk by chunk, and no further than the limit.
    chunks = [b"x" * 3000] * 5
    reply = await call(RUN_PATH, chunks, app=with_content_length(None))

    assert reply.status == 413
    assert sum(reply.received) <= 4096 + 3000  # type: ignore[attr-defined]


RUNTIME_POSTS = [RUN_PATH, "/api/copilotkit", "/api/copilotkit/agent/default/stop/t-1"]


@pytest.mark.parametrize("path", RUNTIME_POSTS)
@pytest.mark.parametrize("length", ["²".encode("latin-1"), b"not-a-number", b"+5", b"-1", b"5.0"])
async def test_a_content_length_that_is_no_number_is_a_400_before_the_body_is_read(
    runtime: Any, path: str, length: bytes
) -> None:
    reply = await call(path, run_body(), app=with_content_length(length))

    assert reply.status == 400, reply.body[:200]
    assert reply.json() == {"error": "invalid_request", "message": BAD_LENGTH}
    assert reply.received == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", RUNTIME_POSTS)
async def test_a_five_thousand_digit_content_length_is_too_large_before_the_body_is_read(
    runtime: Any, path: str
) -> None:
    reply = await call(path, run_body(), app=with_content_length(b"9" * 5000))

    assert reply.status == 413, reply.body[:200]
    assert reply.json()["error"] == "payload_too_large"
    assert reply.received == []  # type: ignore[attr-defined]


async def test_a_client_that_stops_sending_its_body_is_dropped_unanswered(
    runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(front, "BODY_READ_TIMEOUT_SECONDS", 0.05)
    body = run_body()
    scope = {
        "type": "http",
        "method": "POST",
        "path": RUN_PATH,
        "headers": [(b"content-length", str(len(body)).encode())],
    }
    stalled = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if not stalled.is_set():
            stalled.set()
            return {"type": "http.request", "body": body[:10], "more_body": True}
        await asyncio.Event().wait()  # the rest never comes
        raise AssertionError("unreachable")

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def django(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a hot route's body never reaches Django")

    await asyncio.wait_for(RuntimeFront(django)(scope, receive, send), timeout=10)
    assert sent == []


async def test_what_is_not_the_hot_paths_business_reaches_django_with_its_body(
    runtime: Any,
) -> None:
    envelope = await call("/api/copilotkit", orjson.dumps({"method": "info"}))
    bad_json = await call("/api/copilotkit", b'{"query": ')

    assert envelope.status == 200 and "agents" in envelope.json()
    assert bad_json.status == 400 and bad_json.json()["message"] == "Invalid JSON payload"


# --- runs through the front ---------------------------------------------------------------------


async def test_a_v2_run_streams_and_is_stored(runtime: Any) -> None:
    thread_id = f"front-{uuid.uuid4()}"
    reply = await call(
        RUN_PATH,
        run_body(
            threadId=thread_id,
            messages=[{"id": "u1", "role": "user", "content": 'Hi\nFAKE: {"tokens": 3}'}],
        ),
        headers={"accept": "text/event-stream", "origin": "http://localhost:3000"},
    )

    assert reply.status == 200
    assert reply.headers["access-control-allow-origin"] == "http://localhost:3000"
    types = sse_types(reply)
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    stored = await sync_to_async(
        lambda: list(
            Message.objects.filter(thread__thread_id=thread_id)
            .order_by("position")
            .values_list("role", "content")
        )
    )()
    assert stored == [("user", 'Hi\nFAKE: {"tokens": 3}'), ("assistant", "t0 t1 t2")]


async def test_a_run_past_its_time_limit_ends_with_the_limits_error(runtime: Any) -> None:
    thread_id = f"front-{uuid.uuid4()}"
    slow = 'Hi\nFAKE: {"tokens": 200, "delay_ms": 50}'
    settings = {**django_settings.COPILOT_RUNTIME, "RUN_TIME_LIMIT_SECONDS": 1.0}
    with override_settings(COPILOT_RUNTIME=settings):
        reply = await call(
            RUN_PATH,
            run_body(threadId=thread_id, messages=[{"id": "u1", "role": "user", "content": slow}]),
            headers={"accept": "text/event-stream"},
        )

    events = [
        orjson.loads(line[6:]) for line in reply.body.split(b"\n") if line.startswith(b"data: ")
    ]
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == RUN_TIME_LIMIT_CODE
    run = await sync_to_async(lambda: Run.objects.get(thread__thread_id=thread_id))()
    assert run.error_code == RUN_TIME_LIMIT_CODE
    assert 0 < len([e for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]) < 200


def _bodies(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in sent if m["type"] == "http.response.body"]


async def test_a_v2_answer_ends_with_its_last_events(runtime: Any) -> None:
    sent: list[dict[str, Any]] = []
    reply = await call(
        RUN_PATH,
        run_body(messages=[{"id": "u1", "role": "user", "content": 'FAKE: {"tokens": 3}'}]),
        headers={"accept": "text/event-stream"},
        on_send=sent.append,
    )

    assert sse_types(reply)[-1] == "RUN_FINISHED"
    bodies = _bodies(sent)
    assert b'"RUN_FINISHED"' in bodies[-1]["body"]  # no separate empty end
    assert [m["more_body"] for m in bodies] == [True] * (len(bodies) - 1) + [False]


async def test_a_v1_answer_starts_and_ends_in_its_parts_messages(
    runtime: Any, settings: Any
) -> None:
    from copilot_runtime.graphql import transport

    settings.COPILOT_RUNTIME = {**settings.COPILOT_RUNTIME, "MAX_BODY_BYTES": 1_000_000}

    sent: list[dict[str, Any]] = []
    reply = await call(
        "/api/copilotkit",
        v1_body('FAKE: {"tokens": 3}'),
        headers={"accept": "multipart/mixed, application/json"},
        on_send=sent.append,
    )

    assert reply.status == 200
    bodies = _bodies(sent)
    first, last = bodies[0]["body"], bodies[-1]["body"]
    assert first.startswith(transport.multipart_preamble() + b"\r\nContent-Type")
    assert last.endswith(transport.multipart_end()) and b'"hasNext":false' in last
    assert [m["more_body"] for m in bodies] == [True] * (len(bodies) - 1) + [False]


def v1_body(content: str) -> bytes:
    """The 1.10.6 client's mutation for a first message saying ``content``."""
    from benchmarks.client_request import request_variables
    from copilot_runtime.graphql.fastpath.documents import client_mutation_printed

    variables = request_variables(thread_id=f"front-{uuid.uuid4()}", tokens=1)
    variables["data"]["messages"][0]["textMessage"]["content"] = content
    return orjson.dumps(
        {
            "query": client_mutation_printed(),
            "operationName": "generateCopilotResponse",
            "variables": variables,
        }
    )


def _holders_while_streaming(body: bytes) -> dict[str, Any]:
    """What holds the request's body, and what the v2 stream keeps, once the answer streams."""
    seen: dict[str, Any] = {}

    def on_send(message: dict[str, Any]) -> None:
        if message["type"] != "http.response.body" or "holders" in seen:
            return
        gc.collect()
        # The application's coroutines (not this test's, which keep the body they sent).
        seen["holders"] = [
            holder.cr_code.co_qualname
            for holder in gc.get_referrers(body)
            if inspect.iscoroutine(holder) and "/tests/" not in holder.cr_code.co_filename
        ]
        seen["stream_locals"] = [
            sorted(agen.ag_frame.f_locals)
            for agen in gc.get_objects()
            if inspect.isasyncgen(agen)
            and agen.ag_code.co_name == "_run_events"
            and agen.ag_frame is not None
        ]

    seen["on_send"] = on_send
    return seen


@pytest.mark.parametrize("path", [RUN_PATH, "/api/copilotkit"])
async def test_the_request_body_is_not_held_while_the_answer_streams(
    runtime: Any, settings: Any, path: str
) -> None:
    settings.COPILOT_RUNTIME = {**settings.COPILOT_RUNTIME, "MAX_BODY_BYTES": 1_000_000}
    # Fifty streams holding their conversations' histories are megabytes of a process.
    content = 'Hi\nFAKE: {"tokens": 3, "delay_ms": 30}'
    if path == RUN_PATH:
        body = run_body(messages=[{"id": str(uuid.uuid4()), "role": "user", "content": content}])
    else:
        body = v1_body(content)
    seen = _holders_while_streaming(body)

    accept = "text/event-stream" if path == RUN_PATH else "multipart/mixed, application/json"
    reply = await call(path, body, headers={"accept": accept}, on_send=seen["on_send"])

    assert reply.status == 200
    assert seen["holders"] == []
    assert bool(seen["stream_locals"]) == (path == RUN_PATH)
    for stream_locals in seen["stream_locals"]:  # the v2 stream keeps no request input
        assert "echo" not in stream_locals and "run_input" not in stream_locals


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"threadId": "a\x00b"}, "threadId"),
        ({"threadId": "t" * 256}, "threadId"),
        ({"runId": "r" * 65}, "runId"),
        ({"messages": [{"id": "m\x00", "role": "user", "content": "Hi"}]}, "messages[0].id"),
        ({"messages": [{"id": "m1", "role": "user", "content": "a\x00b"}]}, "messages[0].content"),
    ],
)
async def test_values_the_store_cannot_keep_are_a_400_naming_the_field(
    runtime: Any, overrides: dict[str, Any], field: str
) -> None:
    reply = await call(RUN_PATH, run_body(**overrides), headers={"accept": "text/event-stream"})

    assert reply.status == 400, reply.body
    assert field in reply.body.decode()
    assert await Run.objects.acount() == 0


async def test_a_state_nested_deeper_than_the_store_writes_is_a_400(runtime: Any) -> None:
    # orjson reads this (up to 1,024 levels) but cannot write it back (254 at most).
    nested = b'{"a":' * 400 + b"1" + b"}" * 400
    body = run_body(state={"placeholder": True}).replace(b'{"placeholder":true}', nested)

    reply = await call(RUN_PATH, body, headers={"accept": "text/event-stream"})

    assert reply.status == 400, reply.body
    assert reply.json() == {"error": "Invalid request body", "details": TOO_DEEP}
    assert await Run.objects.acount() == 0


async def test_the_v1_mutation_refuses_a_nul_thread_id_as_a_graphql_error(
    runtime: Any, settings: Any
) -> None:
    settings.COPILOT_RUNTIME = {**settings.COPILOT_RUNTIME, "MAX_BODY_BYTES": 1_000_000}
    from benchmarks.client_request import request_variables
    from copilot_runtime.graphql.fastpath.documents import client_mutation_printed

    variables = request_variables(thread_id="bad\x00id", tokens=3)
    body = orjson.dumps(
        {
            "query": client_mutation_printed(),
            "operationName": "generateCopilotResponse",
            "variables": variables,
        }
    )
    reply = await call(
        "/api/copilotkit", body, headers={"accept": "multipart/mixed, application/json"}
    )

    assert reply.status == 200
    assert b"threadId contains a NUL character" in reply.body
    assert await Run.objects.acount() == 0


# --- auth ----------------------------------------------------------------------------------------


async def test_a_database_that_cannot_answer_who_is_calling_is_the_protocols_error(
    runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import OperationalError

    from copilot_runtime.endpoints import front

    async def pool_exhausted(request: object) -> None:
        raise OperationalError("couldn't get a connection after 10.00 sec")

    monkeypatch.setattr(front, "resolve_caller_cached", pool_exhausted)

    reply = await call(RUN_PATH, run_body(), headers={"accept": "text/event-stream"})

    assert reply.status == 503, reply.body
    assert reply.json()["code"] == "NETWORK_ERROR"


async def test_a_revoked_token_is_refused_once_the_cache_time_has_passed(
    runtime: Any, user: Any
) -> None:
    token, raw = await sync_to_async(do_issue_token)(user=user, name="front")
    auth = {"authorization": f"Bearer {raw}", "accept": "text/event-stream"}
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": runtime.base_url,
            "AUTH_CACHE_SECONDS": 0.2,
        }
    ):
        first = await call(RUN_PATH, run_body(), headers=auth)
        await sync_to_async(do_revoke_token)(token=token)
        await asyncio.sleep(0.3)
        second = await call(RUN_PATH, run_body(), headers=auth)

    assert first.status == 200
    assert second.status == 401
    assert await Run.objects.acount() == 1


async def test_an_unknown_token_is_refused_in_each_protocols_shape(runtime: Any) -> None:
    caller_cache_clear()
    auth = {"authorization": "Bearer nope", "accept": "text/event-stream"}
    v2 = await call(RUN_PATH, run_body(), headers=auth)
    v1 = await call("/api/copilotkit", orjson.dumps({"query": "{ hello }"}), headers=auth)

    assert v2.status == 401
    assert v1.status == 200
    assert v1.json()["errors"][0]["extensions"]["code"] == "AUTHENTICATION_ERROR"


async def test_a_session_post_without_csrf_from_an_unlisted_origin_is_refused(
    runtime: Any, user: Any, client: Any
) -> None:
    await sync_to_async(client.force_login)(user)
    session = client.cookies["sessionid"].value
    reply = await call(
        RUN_PATH,
        run_body(),
        headers={
            "cookie": f"sessionid={session}",
            "origin": "http://evil.example",
            "accept": "text/event-stream",
        },
    )

    assert reply.status == 401
    assert "CSRF" in reply.json()["message"]
    assert await Run.objects.acount() == 0


async def test_a_session_post_from_an_allowed_origin_runs_as_its_user(
    runtime: Any, user: Any, client: Any
) -> None:
    await sync_to_async(client.force_login)(user)
    session = client.cookies["sessionid"].value
    thread_id = f"front-{uuid.uuid4()}"
    reply = await call(
        RUN_PATH,
        run_body(threadId=thread_id),
        headers={
            "cookie": f"sessionid={session}",
            "origin": "http://localhost:3000",
            "accept": "text/event-stream",
        },
    )

    assert reply.status == 200
    thread = await Thread.objects.aget(thread_id=thread_id)
    assert thread.owner_id == user.pk


async def test_the_front_passes_other_apps_requests_through() -> None:
    seen: list[str] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    reply = await call("/somewhere/else", b"{}", app=RuntimeFront(inner))

    assert reply.status == 204 and seen == ["/somewhere/else"]
