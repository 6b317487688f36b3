"""Which origins may open the websocket: same origin, no Origin, the CORS allow-list."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import Client, override_settings

from copilot_runtime.ws.origins import OriginDecision, normalized_origin, origin_decision
from tests.copilot_runtime.ws.conftest import LEGACY, RUNTIME_SETTINGS, TRANSPORT, OpenSocket

ALLOWED = "https://app.example.com"
WITH_ALLOW_LIST = {**RUNTIME_SETTINGS, "CORS_ALLOWED_ORIGINS": [ALLOWED]}


@pytest.mark.parametrize(
    ("origin", "normalized"),
    [
        ("https://App.Example.com:443", "https://app.example.com"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://[::1]:8000", "http://[::1]:8000"),
        ("null", None),
        ("not an origin", None),
    ],
)
def test_normalized_origin(origin: str, normalized: str | None) -> None:
    assert normalized_origin(origin) == normalized


@pytest.mark.parametrize(
    ("origin", "host", "allowed_origins", "decision"),
    [
        (None, "api.example.com", [], OriginDecision.ALLOW),
        ("https://api.example.com", "api.example.com", [], OriginDecision.ALLOW),
        ("http://127.0.0.1:8000", "127.0.0.1:8000", [], OriginDecision.ALLOW),
        ("https://api.example.com", "api.example.com:443", [], OriginDecision.ALLOW),
        ("http://127.0.0.1:8001", "127.0.0.1:8000", [], OriginDecision.DENY),
        ("https://evil.example", "api.example.com", [], OriginDecision.DENY),
        ("null", "api.example.com", [], OriginDecision.DENY),
        ("https://app.example.com", "api.example.com", [ALLOWED], OriginDecision.ALLOW),
        ("https://APP.example.com:443", "api.example.com", [ALLOWED], OriginDecision.ALLOW),
        ("http://app.example.com", "api.example.com", [ALLOWED], OriginDecision.DENY),
        (
            "https://evil.example",
            "api.example.com",
            [ALLOWED, "*"],
            OriginDecision.ALLOW_WITHOUT_CREDENTIALS,
        ),
    ],
)
def test_origin_decision(
    origin: str | None, host: str, allowed_origins: list[str], decision: OriginDecision
) -> None:
    with override_settings(COPILOT_RUNTIME={"CORS_ALLOWED_ORIGINS": allowed_origins}):
        assert origin_decision(origin=origin, host=host) is decision


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("protocol", [TRANSPORT, LEGACY])
async def test_a_disallowed_origin_is_refused_at_the_handshake(
    protocol: str, open_socket: OpenSocket
) -> None:
    with override_settings(COPILOT_RUNTIME=WITH_ALLOW_LIST):
        socket = await open_socket(
            protocol, headers={"Origin": "https://evil.example"}, expect_connected=False
        )
    assert socket.close_code is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "origin", ["http://testserver", ALLOWED, None], ids=["same-origin", "listed", "no-origin"]
)
async def test_allowed_origins_connect(open_socket: OpenSocket, origin: str | None) -> None:
    with override_settings(COPILOT_RUNTIME=WITH_ALLOW_LIST):
        socket = await open_socket(TRANSPORT, headers={"Origin": origin} if origin else {})
        assert (await socket.init())["type"] == "connection_ack"


@pytest.mark.django_db(transaction=True)
async def test_a_wildcard_origin_connects_without_the_session(
    open_socket: OpenSocket, user: Any
) -> None:
    def login() -> str:
        client = Client()
        client.force_login(user)
        return client.cookies[settings.SESSION_COOKIE_NAME].value

    cookie = f"{settings.SESSION_COOKIE_NAME}={await sync_to_async(login)()}"
    headers = {"Origin": "https://elsewhere.example", "Cookie": cookie}
    wildcard = {**RUNTIME_SETTINGS, "CORS_ALLOWED_ORIGINS": ["*"], "ALLOW_ANONYMOUS": False}
    with override_settings(COPILOT_RUNTIME=wildcard):
        socket = await open_socket(TRANSPORT, headers=headers)
        refusal = await socket.init()
        # The same cookie from the same origin is a logged-in caller.
        same_origin = await open_socket(
            TRANSPORT, headers={"Origin": "http://testserver", "Cookie": cookie}
        )
        accepted = await same_origin.init()

    assert refusal["code"] == 4403
    assert accepted["type"] == "connection_ack"
