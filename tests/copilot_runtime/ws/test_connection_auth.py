"""Who may use the websocket: bearer tokens in connection_init (or the handshake header), the
Django session, anonymous access as configured; refusals carry their reason."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import Client, override_settings

from conversations.models import Run, Thread
from copilot_runtime.auth import do_issue_token, do_revoke_token
from copilot_runtime.ws.auth import (
    AUTHENTICATION_REQUIRED,
    CREDENTIALS_WITHDRAWN,
    MALFORMED_AUTHORIZATION,
    TOKEN_REFUSED,
    ConnectionRefused,
    connection_token,
)
from tests.copilot_runtime.ws.conftest import (
    COPILOT_STREAM,
    LEGACY,
    RUNTIME_SETTINGS,
    TRANSPORT,
    OpenSocket,
    generate_data,
    payloads_of,
    run_ended,
)

pytestmark = pytest.mark.django_db(transaction=True)

NO_ANONYMOUS = {**RUNTIME_SETTINGS, "ALLOW_ANONYMOUS": False}


async def _token_for(user: Any) -> str:
    _token, raw = await sync_to_async(do_issue_token)(user=user, name="ws-test")
    return raw


async def _session_cookie(user: Any) -> str:
    def login() -> str:
        client = Client()
        client.force_login(user)
        return client.cookies[settings.SESSION_COOKIE_NAME].value

    return f"{settings.SESSION_COOKIE_NAME}={await sync_to_async(login)()}"


async def _thread_owner_after_a_turn(socket: Any, thread_id: str) -> Any:
    await socket.subscribe(
        "turn", COPILOT_STREAM, {"data": generate_data("hi", thread_id=thread_id)}
    )
    payloads = payloads_of(await socket.until_done("turn"), "copilotStream")
    await run_ended(payloads[0]["runId"])
    thread = await Thread.objects.select_related("owner").aget(thread_id=thread_id)
    return thread.owner


# --- the token in connection_init -------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "headers", "expected"),
    [
        ({"authorization": "Bearer abc"}, {}, "abc"),
        ({"Authorization": "bearer  abc "}, {}, "abc"),
        ({"token": "abc"}, {}, "abc"),
        ({}, {"authorization": "Bearer hdr"}, "hdr"),
        ({"token": "abc"}, {"authorization": "Bearer hdr"}, "abc"),
        (None, {}, None),
        ({"other": "x"}, {}, None),
    ],
)
def test_connection_token_is_read_from_the_payload_then_the_handshake(
    params: Any, headers: dict[str, str], expected: str | None
) -> None:
    assert connection_token(params=params, headers=headers) == expected


@pytest.mark.parametrize(
    "params",
    [{"authorization": "Basic abc"}, {"authorization": "Bearer "}, {"token": ""}, {"token": 3}],
)
def test_a_malformed_token_is_refused(params: dict[str, Any]) -> None:
    with pytest.raises(ConnectionRefused) as refused:
        connection_token(params=params, headers={})
    assert refused.value.reason == MALFORMED_AUTHORIZATION


async def test_a_token_user_owns_the_threads_of_their_turns(
    open_socket: OpenSocket, runtime_on_fake: Any, user: Any
) -> None:
    socket = await open_socket(TRANSPORT)
    assert (await socket.init({"authorization": f"Bearer {await _token_for(user)}"}))[
        "type"
    ] == "connection_ack"

    assert (await _thread_owner_after_a_turn(socket, "token-thread")).pk == user.pk


async def test_a_handshake_authorization_header_authenticates(
    open_socket: OpenSocket, runtime_on_fake: Any, user: Any
) -> None:
    socket = await open_socket(
        TRANSPORT, headers={"Authorization": f"Bearer {await _token_for(user)}"}
    )
    assert (await socket.init())["type"] == "connection_ack"
    assert (await _thread_owner_after_a_turn(socket, "header-thread")).pk == user.pk


# --- refusals ---------------------------------------------------------------------------------


async def test_an_invalid_token_closes_graphql_transport_ws_with_4403_and_the_reason(
    open_socket: OpenSocket, runtime_on_fake: Any, user: Any
) -> None:
    token = await sync_to_async(do_issue_token)(user=user, name="revoked")
    await sync_to_async(do_revoke_token)(token=token[0])
    socket = await open_socket(TRANSPORT)

    closed = await socket.init({"token": token[1]})

    assert closed == {"type": "websocket.close", "code": 4403, "reason": TOKEN_REFUSED}


async def test_an_invalid_token_gets_a_legacy_connection_error_with_the_reason(
    open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    socket = await open_socket(LEGACY)

    refusal = await socket.init({"authorization": "Bearer not-a-token"})

    assert refusal["type"] == "connection_error"
    assert refusal["payload"]["message"] == TOKEN_REFUSED
    assert refusal["payload"]["extensions"]["code"] == "AUTHENTICATION_ERROR"
    # Strawberry closes with 1011, which daphne (autobahn) cannot send: 4403 with the reason.
    assert await socket.receive() == {
        "type": "websocket.close",
        "code": 4403,
        "reason": TOKEN_REFUSED,
    }


async def test_a_binary_legacy_message_closes_with_a_code_daphne_can_send(
    open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    socket = await open_socket(LEGACY)
    assert (await socket.init())["type"] == "connection_ack"

    await socket.communicator.send_to(bytes_data=b"\x00")

    closed = await socket.receive()
    assert (closed["type"], closed["code"]) == ("websocket.close", 4400)


async def test_a_refused_connection_runs_no_operation(
    open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    socket = await open_socket(TRANSPORT)
    await socket.send({"type": "connection_init", "payload": {"token": "bad"}})
    await socket.subscribe("1", COPILOT_STREAM, {"data": generate_data("hi")})

    assert (await socket.receive())["code"] == 4403
    assert not await Thread.objects.aexists()


@pytest.mark.parametrize("protocol", [TRANSPORT, LEGACY])
async def test_anonymous_callers_are_refused_when_anonymous_access_is_off(
    protocol: str, open_socket: OpenSocket
) -> None:
    with override_settings(COPILOT_RUNTIME=NO_ANONYMOUS):
        socket = await open_socket(protocol)
        refusal = await socket.init()

    if protocol == TRANSPORT:
        assert refusal == {
            "type": "websocket.close",
            "code": 4403,
            "reason": AUTHENTICATION_REQUIRED,
        }
    else:
        assert refusal["type"] == "connection_error"
        assert refusal["payload"]["message"] == AUTHENTICATION_REQUIRED


async def test_a_session_cookie_authenticates_when_anonymous_access_is_off(
    open_socket: OpenSocket, fake_upstream: Any, user: Any
) -> None:
    cookie = await _session_cookie(user)
    settings_ = {
        **NO_ANONYMOUS,
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": fake_upstream.base_url,
    }
    with override_settings(COPILOT_RUNTIME=settings_):
        socket = await open_socket(LEGACY, headers={"Cookie": cookie})
        assert (await socket.init())["type"] == "connection_ack"
        assert (await _thread_owner_after_a_turn(socket, "session-thread")).pk == user.pk


async def test_an_invalid_token_is_refused_even_with_a_valid_session(
    open_socket: OpenSocket, runtime_on_fake: Any, user: Any
) -> None:
    socket = await open_socket(TRANSPORT, headers={"Cookie": await _session_cookie(user)})

    closed = await socket.init({"token": "wrong"})

    assert closed["code"] == 4403


# --- credentials withdrawn while the socket is open -------------------------------------------


async def _deactivate(user: Any) -> None:
    user.is_active = False
    await user.asave(update_fields=["is_active"])


@pytest.mark.parametrize("protocol", [TRANSPORT, LEGACY])
async def test_a_token_revoked_after_connecting_starts_no_further_run(
    protocol: str, open_socket: OpenSocket, runtime_on_fake: Any, user: Any
) -> None:
    token, raw = await sync_to_async(do_issue_token)(user=user, name="revoked-later")
    socket = await open_socket(protocol)
    assert (await socket.init({"token": raw}))["type"] == "connection_ack"
    await _thread_owner_after_a_turn(socket, "before-revocation")
    runs_before = await Run.objects.acount()

    await sync_to_async(do_revoke_token)(token=token)
    await socket.subscribe("2", COPILOT_STREAM, {"data": generate_data("again")})

    message = await socket.receive()
    if protocol == LEGACY:
        assert message["type"] == "error" and message["id"] == "2"
        assert message["payload"]["message"] == CREDENTIALS_WITHDRAWN
        assert message["payload"]["extensions"]["code"] == "AUTHENTICATION_ERROR"
        message = await socket.receive()
    assert message == {"type": "websocket.close", "code": 4403, "reason": CREDENTIALS_WITHDRAWN}
    assert await Run.objects.acount() == runs_before


async def test_a_session_user_deactivated_after_connecting_starts_no_further_run(
    open_socket: OpenSocket, runtime_on_fake: Any, user: Any
) -> None:
    socket = await open_socket(TRANSPORT, headers={"Cookie": await _session_cookie(user)})
    assert (await socket.init())["type"] == "connection_ack"
    await _thread_owner_after_a_turn(socket, "session-before")

    await _deactivate(user)
    await socket.subscribe("2", COPILOT_STREAM, {"data": generate_data("again")})

    closed = await socket.receive()
    assert (closed["type"], closed["code"]) == ("websocket.close", 4403)
    assert await Run.objects.acount() == 1


async def test_a_live_token_keeps_its_socket_working_across_operations(
    open_socket: OpenSocket, runtime_on_fake: Any, user: Any
) -> None:
    socket = await open_socket(TRANSPORT)
    assert (await socket.init({"token": await _token_for(user)}))["type"] == "connection_ack"

    await _thread_owner_after_a_turn(socket, "first")
    await _thread_owner_after_a_turn(socket, "second")

    assert await Run.objects.acount() == 2
