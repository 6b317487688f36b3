"""CORS on the runtime endpoint: preflights answered, allowed origins echoed, others ignored."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from tests.copilot_runtime.http.helpers import ENDPOINT, body_of, post_graphql

pytestmark = pytest.mark.django_db

ALLOWED = "https://app.example.com"
OTHER = "https://evil.example.net"
CORS_SETTINGS = {"CORS_ALLOWED_ORIGINS": [ALLOWED, "http://localhost:3000"]}


def preflight(client: Client, origin: str, requested_headers: str | None = None) -> object:
    headers = {"Origin": origin, "Access-Control-Request-Method": "POST"}
    if requested_headers is not None:
        headers["Access-Control-Request-Headers"] = requested_headers
    return client.options(ENDPOINT, headers=headers)


@override_settings(COPILOT_RUNTIME=CORS_SETTINGS)
def test_a_preflight_from_an_allowed_origin_is_answered(client: Client) -> None:
    response = preflight(client, ALLOWED, "content-type, x-custom")

    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == ALLOWED
    assert response["Access-Control-Allow-Headers"] == "content-type, x-custom"
    assert response["Access-Control-Allow-Credentials"] == "true"
    assert "POST" in response["Access-Control-Allow-Methods"]
    assert "Origin" in response["Vary"]


@override_settings(COPILOT_RUNTIME=CORS_SETTINGS)
def test_a_preflight_echoes_any_custom_headers(client: Client) -> None:
    response = preflight(client, "http://localhost:3000", "authorization, x-copilotkit-thing")

    assert response["Access-Control-Allow-Origin"] == "http://localhost:3000"
    assert response["Access-Control-Allow-Headers"] == "authorization, x-copilotkit-thing"


@override_settings(COPILOT_RUNTIME=CORS_SETTINGS)
def test_a_preflight_of_a_sub_path_is_answered(client: Client) -> None:
    response = client.options(
        ENDPOINT + "/info", headers={"Origin": ALLOWED, "Access-Control-Request-Method": "GET"}
    )

    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == ALLOWED


@override_settings(COPILOT_RUNTIME=CORS_SETTINGS)
def test_a_preflight_from_another_origin_gets_no_cors_headers(client: Client) -> None:
    response = preflight(client, OTHER, "content-type")

    assert "Access-Control-Allow-Origin" not in response
    assert "Access-Control-Allow-Headers" not in response
    assert "Access-Control-Allow-Credentials" not in response


@override_settings(COPILOT_RUNTIME=CORS_SETTINGS)
def test_a_post_from_an_allowed_origin_carries_the_header(client: Client) -> None:
    response = post_graphql(client, "{ hello }", headers={"Origin": ALLOWED})

    assert response.status_code == 200
    assert body_of(response) == {"data": {"hello": "Hello World"}}
    assert response["Access-Control-Allow-Origin"] == ALLOWED
    assert response["Access-Control-Allow-Credentials"] == "true"


@override_settings(COPILOT_RUNTIME=CORS_SETTINGS)
def test_an_error_answer_to_an_allowed_origin_carries_the_header(client: Client) -> None:
    response = client.post(
        ENDPOINT, data=b"not json", content_type="application/json", headers={"Origin": ALLOWED}
    )

    assert response.status_code == 400
    assert response["Access-Control-Allow-Origin"] == ALLOWED


@override_settings(COPILOT_RUNTIME=CORS_SETTINGS)
def test_a_post_from_another_origin_has_no_cors_header(client: Client) -> None:
    response = post_graphql(client, "{ hello }", headers={"Origin": OTHER})

    assert "Access-Control-Allow-Origin" not in response


@override_settings(COPILOT_RUNTIME=CORS_SETTINGS)
def test_other_paths_are_not_decorated(client: Client) -> None:
    response = client.get("/healthz", headers={"Origin": ALLOWED})

    assert response.status_code == 200
    assert "Access-Control-Allow-Origin" not in response


@override_settings(COPILOT_RUNTIME={"CORS_ALLOWED_ORIGINS": []})
def test_no_origin_is_allowed_by_default(client: Client) -> None:
    response = preflight(client, ALLOWED, "content-type")

    assert "Access-Control-Allow-Origin" not in response


# --- the development default --------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin", ["http://localhost:3000", "http://127.0.0.1:5173", "http://[::1]:8080"]
)
def test_while_debug_is_on_loopback_origins_on_any_port_are_allowed(
    client: Client, origin: str
) -> None:
    with override_settings(DEBUG=True, COPILOT_RUNTIME={}):
        response = preflight(client, origin, "content-type")
    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == origin
    assert response["Access-Control-Allow-Credentials"] == "true"


@pytest.mark.parametrize(
    ("debug", "conf"),
    [(False, {}), (True, {"CORS_LOOPBACK_IN_DEBUG": False})],
)
def test_loopback_origins_are_not_allowed_in_production_or_when_turned_off(
    client: Client, debug: bool, conf: dict
) -> None:
    with override_settings(DEBUG=debug, COPILOT_RUNTIME=conf):
        response = preflight(client, "http://localhost:3000", "content-type")
    assert "Access-Control-Allow-Origin" not in response


def test_a_refused_preflight_says_why_in_the_log(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    origin = "https://unlisted.example.org"
    with override_settings(DEBUG=False, COPILOT_RUNTIME={}):
        preflight(client, origin, "content-type")
        preflight(client, origin, "content-type")
    refusals = [r.getMessage() for r in caplog.records if "refused the CORS preflight" in r.message]
    assert len(refusals) == 1  # once per origin
    assert origin in refusals[0] and "CORS_ALLOWED_ORIGINS" in refusals[0]


def test_a_non_loopback_origin_is_never_allowed_by_the_development_default(
    client: Client,
) -> None:
    with override_settings(DEBUG=True, COPILOT_RUNTIME={}):
        response = preflight(client, "http://localhost.evil.example.net:3000", "content-type")
    assert "Access-Control-Allow-Origin" not in response
