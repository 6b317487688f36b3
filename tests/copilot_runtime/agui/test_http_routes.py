"""HTTP behaviour of the v2 routes: /info, 404, 405, 415, 400, the envelope, CORS, auth."""

from __future__ import annotations

import pytest
from django.test import AsyncClient, override_settings

from tests.copilot_runtime.agui.helpers import BASE, body_of, post, run_body, user

pytestmark = pytest.mark.django_db

INFO_KEYS = {
    "version",
    "agents",
    "audioFileTranscriptionEnabled",
    "mode",
    "threadEndpoints",
    "suggestions",
    "a2uiEnabled",
    "openGenerativeUIEnabled",
    "telemetryDisabled",
}


# What the TypeScript runtime 1.75's BuiltInAgent answers (captured from it on the fake).
TS_BUILT_IN_CAPABILITIES = {
    "tools": {"supported": True, "clientProvided": True},
    "transport": {"streaming": True},
    "humanInTheLoop": {"interrupts": True},
}
THREAD_ENDPOINTS_ON = {"list": True, "inspect": True, "mutations": False, "realtimeMetadata": False}


async def test_info_lists_the_agents_in_the_typescript_shape() -> None:
    agents = {
        "helper": {"description": "Helps"},
        "server": {"kind": "agui", "url": "http://127.0.0.1:9/agent"},
        "writer": {"kind": "llm", "instructions": "Write.", "frontend_actions": False},
    }
    with override_settings(COPILOT_RUNTIME={"AGENTS": agents}):
        response = await AsyncClient().get(BASE + "/info")
    assert response.status_code == 200
    info = body_of(response)
    assert set(info) == INFO_KEYS
    assert info["mode"] == "sse"
    assert info["threadEndpoints"] == THREAD_ENDPOINTS_ON
    assert info["agents"]["default"] == {
        "name": "default",
        "description": info["agents"]["default"]["description"],
        "className": "BuiltInAgent",
        "capabilities": TS_BUILT_IN_CAPABILITIES,
    }
    assert info["agents"]["helper"] == {
        "name": "helper",
        "description": "Helps",
        "className": "HttpAgent",
        "capabilities": {
            **TS_BUILT_IN_CAPABILITIES,
            "state": {"snapshots": True, "deltas": True, "persistentState": True},
        },
    }
    # An AG-UI server alone knows what it can do (TypeScript's HttpAgent says nothing either).
    assert "capabilities" not in info["agents"]["server"]
    assert info["agents"]["writer"]["className"] == "BuiltInAgent"
    assert info["agents"]["writer"]["capabilities"]["tools"] == {
        "supported": True,
        "clientProvided": False,
    }


async def test_an_agents_own_capabilities_are_merged_over_the_inferred_ones() -> None:
    agents = {
        "default": {"capabilities": {"reasoning": {"supported": True}}},
        "server": {
            "kind": "agui",
            "url": "http://x/",
            "capabilities": {"tools": {"supported": False}},
        },
    }
    with override_settings(COPILOT_RUNTIME={"AGENTS": agents}):
        info = body_of(await AsyncClient().get(BASE + "/info"))
    assert info["agents"]["default"]["capabilities"] == {
        **TS_BUILT_IN_CAPABILITIES,
        "reasoning": {"supported": True},
    }
    assert info["agents"]["server"]["capabilities"] == {"tools": {"supported": False}}


async def test_the_envelope_answers_info_with_its_resource_operations() -> None:
    response = await post(AsyncClient(), "", {"method": "info"})
    assert response.status_code == 200
    info = body_of(response)
    # As the TypeScript runtime's single route: the thread endpoints are reached through
    # resource/request, which singleRoute announces; the top-level flags are off.
    assert set(info) == INFO_KEYS | {"singleRoute"}
    assert info["threadEndpoints"]["list"] is False
    assert info["singleRoute"] == {
        "resourceOperations": True,
        "threadEndpoints": THREAD_ENDPOINTS_ON,
    }
    assert "default" in info["agents"]


async def test_unknown_routes_are_404() -> None:
    response = await AsyncClient().get(BASE + "/nothing/here")
    assert response.status_code == 404
    assert body_of(response) == {"error": "Not found"}


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("post", "/info", "GET"),
        ("get", "/agent/default/run", "POST"),
        ("get", "/agent/default/stop/t-1", "POST"),
        ("post", "/threads", "GET"),
        ("post", "/threads/t-1", "PATCH, DELETE"),
        ("put", "/threads/t-1/messages", "GET"),
    ],
)
async def test_a_wrong_method_is_405_with_allow(method: str, path: str, allow: str) -> None:
    response = await getattr(AsyncClient(), method)(BASE + path)
    assert response.status_code == 405
    assert response["Allow"] == allow
    assert body_of(response) == {"error": "Method not allowed"}


async def test_an_unknown_agent_is_404_with_its_name() -> None:
    response = await post(AsyncClient(), "/agent/ghost/run", run_body("t-1", [user("u1", "Hi")]))
    assert response.status_code == 404
    assert body_of(response) == {
        "error": "Agent not found",
        "message": "Agent 'ghost' does not exist",
    }


async def test_a_non_json_body_is_400_invalid_request_body_as_in_typescript() -> None:
    response = await AsyncClient().post(
        BASE + "/agent/default/run", b"threadId=1", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 400
    payload = body_of(response)
    assert payload["error"] == "Invalid request body"
    assert "JSON request bodies only" in payload["details"]


@pytest.mark.parametrize("path", ["/agent/default/run", "/agent/default/connect"])
async def test_invalid_json_is_400_with_the_parsers_message_in_details(path: str) -> None:
    response = await AsyncClient().post(
        BASE + path, b'{"threadId": ', content_type="application/json"
    )
    assert response.status_code == 400
    payload = body_of(response)
    assert set(payload) == {"error", "details"}
    assert payload["error"] == "Invalid request body"
    assert "not valid JSON" in payload["details"]


# The TypeScript single route's 415, byte for byte (what TS 1.75 sends for text/plain "hello").
TS_415 = b'{"error":"invalid_request","message":"Single-route endpoint expects JSON payloads"}'


@pytest.mark.parametrize(
    ("content_type", "data"),
    [
        ("text/plain", b"hello"),
        ("text/plain;charset=UTF-8", b"hello"),  # what fetch() sends for a string body
        ("text/plain", b""),
        ("text/html", b"hello"),
        # An envelope that is JSON but not declared so: the single route reads JSON only.
        ("text/plain", b'{"method": "info"}'),
        ("text/plain", b'{"variables": {}}'),
    ],
)
async def test_the_envelope_refuses_a_body_not_declared_json_with_the_ts_415(
    content_type: str, data: bytes
) -> None:
    response = await AsyncClient().post(BASE, data, content_type=content_type)
    assert response.status_code == 415
    assert response["Content-Type"] == "application/json"
    assert response.content == TS_415


async def test_text_plain_that_is_not_json_stays_400_on_the_rest_routes_as_in_typescript() -> None:
    # TypeScript's REST handlers parse whatever the content type: "Invalid request body".
    response = await AsyncClient().post(
        BASE + "/agent/default/run", b"hello", content_type="text/plain"
    )
    assert response.status_code == 400
    payload = body_of(response)
    assert payload["error"] == "Invalid request body"
    assert "not JSON" in payload["details"]


async def test_the_envelope_refuses_invalid_json_in_its_own_shape() -> None:
    response = await AsyncClient().post(BASE, b'{"method": ', content_type="application/json")
    assert response.status_code == 400
    payload = body_of(response)
    assert payload["error"] == "invalid_request"
    assert payload["message"] == "Invalid JSON payload"
    assert "not valid JSON" in payload["details"]


async def test_an_invalid_body_is_400_with_the_details() -> None:
    response = await post(AsyncClient(), "/agent/default/run", {"threadId": 5, "messages": []})
    assert response.status_code == 400
    payload = body_of(response)
    assert payload["error"] == "Invalid request body"
    assert '"path":["threadId"]' in payload["details"]
    assert '"path":["runId"]' in payload["details"]


async def test_the_envelope_refuses_unknown_methods_and_missing_params() -> None:
    client = AsyncClient()
    unknown = await post(client, "", {"method": "foo"})
    assert unknown.status_code == 400
    assert body_of(unknown) == {"error": "invalid_request", "message": "Unsupported method 'foo'"}
    missing = await post(client, "", {"method": "agent/run", "params": {}, "body": {}})
    assert body_of(missing)["message"] == "Missing or invalid parameter 'agentId'"
    no_body = await post(client, "", {"method": "agent/run", "params": {"agentId": "default"}})
    assert body_of(no_body)["message"] == "Missing request body for JSON handler"
    ghost = await post(
        client, "", {"method": "agent/stop", "params": {"agentId": "ghost", "threadId": "t"}}
    )
    assert ghost.status_code == 404


@override_settings(COPILOT_RUNTIME={"CORS_ALLOWED_ORIGINS": ["https://app.example.com"]})
async def test_cors_preflight_of_a_run_is_answered() -> None:
    response = await AsyncClient().options(
        BASE + "/agent/default/run",
        headers={
            "Origin": "https://app.example.com",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, x-app",
        },
    )
    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert response["Access-Control-Allow-Headers"] == "content-type, x-app"
    info = await AsyncClient().get(BASE + "/info", headers={"Origin": "https://app.example.com"})
    assert info["Access-Control-Allow-Origin"] == "https://app.example.com"


@override_settings(COPILOT_RUNTIME={"ALLOW_ANONYMOUS": False})
async def test_anonymous_callers_are_refused_when_not_allowed() -> None:
    response = await AsyncClient().get(BASE + "/info")
    assert response.status_code == 401
    assert body_of(response)["code"] == "AUTHENTICATION_ERROR"
    envelope = await post(AsyncClient(), "", {"method": "info"})
    assert envelope.status_code == 401


async def test_a_database_that_cannot_answer_who_is_calling_is_a_503_in_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What an exhausted pool raises while the caller's session or token is read.
    from django.db import OperationalError

    from copilot_runtime.agui import views

    async def pool_exhausted(request: object) -> None:
        raise OperationalError("couldn't get a connection after 10.00 sec")

    monkeypatch.setattr(views, "resolve_caller", pool_exhausted)

    response = await AsyncClient().get(BASE + "/threads")

    assert response.status_code == 503
    assert response["Content-Type"].startswith("application/json")
    assert body_of(response)["code"] == "NETWORK_ERROR"
