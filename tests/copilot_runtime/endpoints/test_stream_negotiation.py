"""How ``generateCopilotResponse`` streams depends on what the client accepts."""

from __future__ import annotations

import orjson
import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.test import AsyncClient

from copilot_runtime.graphql.fastpath.documents import client_mutation_printed

pytestmark = pytest.mark.django_db(transaction=True)


def _body(thread_id: str) -> bytes:
    return orjson.dumps(
        {
            "operationName": "generateCopilotResponse",
            "query": client_mutation_printed(),
            "variables": {
                "data": {
                    "threadId": thread_id,
                    "frontend": {"actions": []},
                    "messages": [
                        {
                            "id": "u1",
                            "createdAt": "2025-01-01T00:00:00.000Z",
                            "textMessage": {
                                "content": 'FAKE: {"text": "Hi there"}',
                                "role": "user",
                            },
                        }
                    ],
                    "metadata": {"requestType": "Chat"},
                },
                "properties": {},
            },
        }
    )


async def _read(response) -> bytes:
    chunks = [chunk async for chunk in response.streaming_content]
    await sync_to_async(connections.close_all)()
    return b"".join(chunks)


async def test_the_real_clients_accept_header_gets_multipart(model_on_the_fake) -> None:
    response = await AsyncClient().post(
        "/api/copilotkit",
        _body("negotiate-1"),
        content_type="application/json",
        headers={
            "Accept": "application/graphql-response+json, application/graphql+json, "
            "application/json, text/event-stream, multipart/mixed"
        },
    )
    assert response.status_code == 200
    assert response["Content-Type"] == 'multipart/mixed; boundary="-"'
    assert response["X-Accel-Buffering"] == "no"
    assert not response.has_header("X-CopilotKit-Runtime-Version")
    assert not response.has_header("Content-Encoding")
    body = await _read(response)
    assert body.startswith(b"\r\n---\r\nContent-Type: application/json; charset=utf-8\r\n")
    assert body.endswith(b"\r\n-----\r\n")
    parts = [p.split(b"\r\n\r\n", 1)[1] for p in body.split(b"\r\n---")[1:-1]]
    payloads = [orjson.loads(p) for p in parts]
    assert payloads[0]["hasNext"] is True
    assert payloads[-1]["hasNext"] is False
    items = [
        item
        for payload in payloads
        for entry in payload.get("incremental", [])
        if entry["path"][-2:-1] == ["content"]
        for item in entry["items"]
    ]
    assert "".join(items) == "Hi there"


async def test_an_sse_only_client_gets_server_sent_events(model_on_the_fake) -> None:
    response = await AsyncClient().post(
        "/api/copilotkit",
        _body("negotiate-2"),
        content_type="application/json",
        headers={"Accept": "text/event-stream"},
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    body = (await _read(response)).decode()
    events = [block for block in body.split("\n\n") if block.strip()]
    assert events[-1] == "event: complete\ndata:"
    first = events[0]
    assert first.startswith("event: next\ndata: ")
    assert orjson.loads(first.split("data: ", 1)[1])["hasNext"] is True


async def test_a_json_only_client_gets_406_for_a_streamed_operation(model_on_the_fake) -> None:
    response = await AsyncClient().post(
        "/api/copilotkit",
        _body("negotiate-3"),
        content_type="application/json",
        headers={"Accept": "application/json"},
    )
    assert response.status_code == 406
    assert "multipart/mixed" in response["Accept"]


async def test_queries_keep_answering_plain_json() -> None:
    response = await AsyncClient().post(
        "/api/copilotkit",
        orjson.dumps({"query": "{hello}"}),
        content_type="application/json",
        headers={"Accept": "application/graphql-response+json, multipart/mixed"},
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/graphql-response+json")
    assert orjson.loads(response.content) == {"data": {"hello": "Hello World"}}
