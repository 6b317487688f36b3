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


async def test_info_lists_the_agents_in_the_typescript_shape() -> None:
    with override_settings(COPILOT_RUNTIME={"AGENTS": {"helper": {"description": "Helps"}}}):
        response = await AsyncClient().get(BASE + "/info")
    assert response.status_code == 200
    info = body_of(response)
    assert set(info) == INFO_KEYS
    assert info["mode"] == "sse"
    assert info["threadEndpoints"] == {
        "list": True,
        "inspect": True,
        "mutations": False,
        "realtimeMetadata": False,
    }
    assert info["agents"]["default"]["name"] == "default"
    assert info["agents"]["helper"] == {
        "name": "helper",
        "description": "Helps",
        "className": "HttpAgent",
    }


async def test_the_envelope_answers_info_without_thread_endpoints() -> None:
    response = await post(AsyncClient(), "", {"method": "info"})
    assert response.status_code == 200
    assert body_of(response)["threadEndpoints"]["list"] is False
    assert "default" in body_of(response)["agents"]


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


async def test_a_non_json_body_is_415() -> None:
    response = await AsyncClient().post(
        BASE + "/agent/default/run", b"threadId=1", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415


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
