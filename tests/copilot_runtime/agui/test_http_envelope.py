"""The single-route envelope runs, connects and stops like the REST routes; suggestions; the
replay cursor; a v2 thread read back over GraphQL."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from django.test import AsyncClient

from tests.copilot_runtime.agui.helpers import (
    BASE,
    body_of,
    fake,
    post,
    read_events,
    run_body,
    types,
    user,
)
from tests.copilot_runtime.agui.test_http_runs import run_ended

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("_close_run_thread_connections"),
]

LOAD_AGENT_STATE = """
query loadAgentState($data: LoadAgentStateInput!) {
  loadAgentState(data: $data) { threadId threadExists state messages }
}
"""


def envelope(method: str, body: Any = None, **params: str) -> dict[str, Any]:
    payload: dict[str, Any] = {"method": method, "params": params}
    if body is not None:
        payload["body"] = body
    return payload


async def test_run_connect_and_stop_through_the_envelope(runtime_on_fake) -> None:
    client = AsyncClient()
    body = run_body("env-1", [user("u1", fake({"text": "Hi from the envelope"}))])
    events = await read_events(
        await post(client, "", envelope("agent/run", body, agentId="default"))
    )
    assert types(events)[0] == "RUN_STARTED"
    assert types(events)[-1] == "RUN_FINISHED"
    await run_ended(body["runId"])

    replay = await read_events(
        await post(client, "", envelope("agent/connect", run_body("env-1", []), agentId="default"))
    )
    assert [e["delta"] for e in replay if e["type"] == "TEXT_MESSAGE_CONTENT"] == [
        "Hi from the envelope"
    ]
    stop = await post(client, "", envelope("agent/stop", agentId="default", threadId="env-1"))
    assert body_of(stop) == {"stopped": False, "message": "No active run for thread 'env-1'."}


async def test_connect_honours_last_seen_event_id(runtime_on_fake) -> None:
    client = AsyncClient()
    first = run_body("cursor-1", [user("u1", fake({"text": "one"}))])
    await read_events(await post(client, "/agent/default/run", first))
    await run_ended(first["runId"])
    second = run_body(
        "cursor-1",
        [
            user("u1", fake({"text": "one"})),
            {"id": "a1", "role": "assistant", "content": "one"},
            user("u2", fake({"text": "two"})),
        ],
    )
    await read_events(await post(client, "/agent/default/run", second))
    await run_ended(second["runId"])

    everything = await read_events(
        await post(client, "/agent/default/connect", run_body("cursor-1", []))
    )
    assert [e["runId"] for e in everything if e["type"] == "RUN_STARTED"] == [
        first["runId"],
        second["runId"],
    ]
    after_first = await read_events(
        await post(
            client,
            "/agent/default/connect",
            run_body("cursor-1", [], lastSeenEventId=first["runId"]),
        )
    )
    assert [e["runId"] for e in after_first if e["type"] == "RUN_STARTED"] == [second["runId"]]
    assert after_first[0]["input"]["messages"] == [
        {"id": "a1", "role": "assistant", "content": "one"},
        {"id": "u2", "role": "user", "content": fake({"text": "two"})},
    ]


async def test_suggest_streams_a_stateless_run(runtime_on_fake, fake_upstream) -> None:
    from conversations.models import Thread

    fake_upstream.script(
        {
            "tool_calls": [
                {
                    "name": "copilotkitSuggest",
                    "arguments": {"suggestions": [{"title": "Hi", "message": "Say hi"}]},
                }
            ]
        }
    )
    suggest_tool = {
        "name": "copilotkitSuggest",
        "description": "Suggest",
        "parameters": {"type": "object", "properties": {}},
    }
    body = run_body(
        "suggest-1",
        [user("s1", "Suggest what the user could say next.")],
        tools=[suggest_tool],
        forwardedProps={
            "toolChoice": {"type": "function", "function": {"name": "copilotkitSuggest"}}
        },
    )
    events = await read_events(await post(AsyncClient(), "/agent/default/suggest", body))
    assert types(events)[0] == "RUN_STARTED"
    assert "TOOL_CALL_START" in types(events)
    assert types(events)[-1] == "RUN_FINISHED"
    request = fake_upstream.requests()[-1]
    assert request["tool_choice"] == {"type": "function", "function": {"name": "copilotkitSuggest"}}
    assert not await Thread.objects.filter(thread_id="suggest-1").aexists()


async def test_a_v2_thread_is_loaded_back_over_graphql(runtime_on_fake) -> None:
    client = AsyncClient()
    body = run_body("cross-1", [user("u1", fake({"text": "Stored for v1"}))])
    await read_events(await post(client, "/agent/default/run", body))
    await run_ended(body["runId"])
    response = await client.post(
        BASE,
        orjson.dumps(
            {
                "query": LOAD_AGENT_STATE,
                "variables": {"data": {"threadId": "cross-1", "agentName": "default"}},
            }
        ),
        content_type="application/json",
    )
    loaded = body_of(response)["data"]["loadAgentState"]
    assert loaded["threadExists"] is True
    messages = orjson.loads(loaded["messages"])
    first = messages[0]
    assert (first["id"], first["role"], first["content"]) == (
        "u1",
        "user",
        fake({"text": "Stored for v1"}),
    )
    assert messages[1]["content"] == "Stored for v1"
