"""Who may call ``/api/copilotkit``: bearer tokens, the session (with CSRF), anonymous callers."""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone
from pytest_django.fixtures import Settings

from copilot_runtime.auth import do_issue_token, do_revoke_token
from copilot_runtime.models import TOKEN_PREFIX, ApiToken, token_hash
from tests.conversations.factories import message_row, thread_create
from tests.copilot_runtime.http.helpers import (
    assert_no_traceback,
    body_of,
    error_code,
    load_agent_state,
)

pytestmark = pytest.mark.django_db

ALLOWED_ORIGIN = "https://app.example.com"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alices_thread(user: Any) -> str:
    thread = thread_create(thread_id="alices-thread", owner=user)
    message_row(thread=thread, position=0, message_id="m1", role="user", content="Hi")
    return thread.thread_id


def thread_exists_for(client: Client, thread_id: str, **headers: str) -> bool:
    response = load_agent_state(client, thread_id=thread_id, headers=headers)
    assert response.status_code == 200, response.content
    body = body_of(response)
    assert "errors" not in body, body
    return body["data"]["loadAgentState"]["threadExists"]


def bearer(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


def assert_authentication_error(response: Any) -> None:
    assert_no_traceback(response)
    assert error_code(response) == "AUTHENTICATION_ERROR"
    assert body_of(response)["data"] is None


# --- bearer tokens ----------------------------------------------------------------------------


def test_a_bearer_token_acts_as_its_user(client: Client, user: Any, alices_thread: str) -> None:
    _token, raw = do_issue_token(user=user, name="ci")

    assert thread_exists_for(client, alices_thread, **bearer(raw)) is True
    # The same request without the token is an anonymous caller, who cannot see it.
    assert thread_exists_for(client, alices_thread) is False


def test_the_bearer_scheme_is_case_insensitive(
    client: Client, user: Any, alices_thread: str
) -> None:
    _token, raw = do_issue_token(user=user, name="ci")

    assert thread_exists_for(client, alices_thread, Authorization=f"bearer {raw}") is True


def test_a_revoked_token_is_refused(client: Client, user: Any) -> None:
    token, raw = do_issue_token(user=user, name="ci")
    do_revoke_token(token=token)

    response = load_agent_state(client, thread_id="t", headers=bearer(raw))

    assert_authentication_error(response)


def test_an_unknown_token_is_refused(client: Client, user: Any) -> None:
    do_issue_token(user=user, name="ci")

    response = load_agent_state(client, thread_id="t", headers=bearer(TOKEN_PREFIX + "x" * 43))

    assert_authentication_error(response)


def test_a_token_of_an_inactive_user_is_refused(client: Client, user: Any) -> None:
    _token, raw = do_issue_token(user=user, name="ci")
    user.is_active = False
    user.save()

    response = load_agent_state(client, thread_id="t", headers=bearer(raw))

    assert_authentication_error(response)


def test_an_unknown_token_is_refused_even_when_anonymous_callers_are_welcome(
    client: Client,
) -> None:
    with override_settings(COPILOT_RUNTIME={"ALLOW_ANONYMOUS": True}):
        response = load_agent_state(client, thread_id="t", headers=bearer("crt_guess"))

    assert_authentication_error(response)


def test_only_the_tokens_sha256_is_stored(user: Any) -> None:
    token, raw = do_issue_token(user=user, name="ci")

    assert raw.startswith(TOKEN_PREFIX)
    assert len(raw) >= 40
    assert token.token_hash == token_hash(raw)
    assert len(token.token_hash) == 64
    assert token.token_prefix == raw[:10]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiToken._meta.db_table} WHERE id = %s", [token.pk])
        row = cursor.fetchone()
    assert raw not in repr(row)
    assert (
        raw
        not in orjson.dumps(
            ApiToken.objects.filter(pk=token.pk).values().get(), default=str
        ).decode()
    )


def test_two_tokens_are_different(user: Any) -> None:
    _first, raw_first = do_issue_token(user=user, name="one")
    _second, raw_second = do_issue_token(user=user, name="two")

    assert raw_first != raw_second


def test_using_a_token_records_when_it_was_last_used(client: Client, user: Any) -> None:
    token, raw = do_issue_token(user=user, name="ci")
    assert token.last_used_at is None
    before = timezone.now()

    thread_exists_for(client, "t", **bearer(raw))

    token.refresh_from_db()
    assert token.last_used_at is not None
    assert token.last_used_at >= before


def test_last_use_is_refreshed_when_it_is_old(client: Client, user: Any) -> None:
    token, raw = do_issue_token(user=user, name="ci")
    long_ago = timezone.now() - dt.timedelta(hours=3)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=long_ago)

    thread_exists_for(client, "t", **bearer(raw))

    token.refresh_from_db()
    assert token.last_used_at > long_ago + dt.timedelta(hours=2)


def test_revoking_twice_keeps_the_first_revocation_time(user: Any) -> None:
    token, _raw = do_issue_token(user=user, name="ci")
    do_revoke_token(token=token)
    first = token.revoked_at

    do_revoke_token(token=token)

    token.refresh_from_db()
    assert token.revoked_at == first
    assert token.is_active is False


# --- the session, with CSRF -------------------------------------------------------------------


@pytest.fixture
def csrf_client(user: Any) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def csrf_cookie(client: Client) -> str:
    """The csrftoken cookie, as a browser gets it from any page with a form."""
    client.get("/admin/login/")
    return client.cookies[django_settings.CSRF_COOKIE_NAME].value


@pytest.mark.parametrize("has_cookie", [False, True], ids=["no-cookie", "cookie-only"])
def test_a_session_post_without_the_csrf_token_is_refused(
    csrf_client: Client, alices_thread: str, has_cookie: bool
) -> None:
    if has_cookie:
        csrf_cookie(csrf_client)

    response = load_agent_state(csrf_client, thread_id=alices_thread)

    assert_authentication_error(response)
    assert "CSRF" in body_of(response)["errors"][0]["message"]


def test_a_session_post_with_the_csrf_header_is_the_user(
    csrf_client: Client, alices_thread: str
) -> None:
    token = csrf_cookie(csrf_client)

    assert thread_exists_for(csrf_client, alices_thread, **{"X-CSRFToken": token}) is True


def test_a_session_post_with_a_wrong_csrf_header_is_refused(
    csrf_client: Client, alices_thread: str
) -> None:
    csrf_cookie(csrf_client)

    response = load_agent_state(
        csrf_client, thread_id=alices_thread, headers={"X-CSRFToken": "x" * 32}
    )

    assert_authentication_error(response)


@override_settings(COPILOT_RUNTIME={"CORS_ALLOWED_ORIGINS": [ALLOWED_ORIGIN]})
def test_a_session_post_from_an_allowed_origin_needs_no_csrf_token(
    csrf_client: Client, alices_thread: str
) -> None:
    assert thread_exists_for(csrf_client, alices_thread, Origin=ALLOWED_ORIGIN) is True


@override_settings(COPILOT_RUNTIME={"CORS_ALLOWED_ORIGINS": [ALLOWED_ORIGIN]})
def test_a_session_post_from_another_origin_is_refused(
    csrf_client: Client, alices_thread: str
) -> None:
    response = load_agent_state(
        csrf_client, thread_id=alices_thread, headers={"Origin": "https://evil.example.net"}
    )

    assert_authentication_error(response)


def test_a_bearer_token_needs_no_csrf_token(user: Any, alices_thread: str) -> None:
    client = Client(enforce_csrf_checks=True)
    _token, raw = do_issue_token(user=user, name="ci")

    assert thread_exists_for(client, alices_thread, **bearer(raw)) is True


# --- anonymous callers ------------------------------------------------------------------------


@override_settings(COPILOT_RUNTIME={"ALLOW_ANONYMOUS": False})
def test_anonymous_callers_are_refused_when_not_allowed(client: Client) -> None:
    response = load_agent_state(client, thread_id="t")

    assert_authentication_error(response)


@override_settings(COPILOT_RUNTIME={"ALLOW_ANONYMOUS": False})
def test_hello_is_refused_too_when_anonymous_callers_are_not_allowed(client: Client) -> None:
    response = client.post(
        "/api/copilotkit", data={"query": "{ hello }"}, content_type="application/json"
    )

    assert_authentication_error(response)


@override_settings(COPILOT_RUNTIME={"ALLOW_ANONYMOUS": False})
def test_authenticated_callers_pass_when_anonymous_ones_are_refused(
    client: Client, user: Any, alices_thread: str
) -> None:
    _token, raw = do_issue_token(user=user, name="ci")
    assert thread_exists_for(client, alices_thread, **bearer(raw)) is True

    client.force_login(user)
    assert thread_exists_for(client, alices_thread) is True


def test_anonymous_callers_are_welcome_by_default(client: Client) -> None:
    assert thread_exists_for(client, "no-such-thread") is False


def test_a_non_bearer_authorization_header_is_not_a_token(client: Client) -> None:
    assert thread_exists_for(client, "t", Authorization="Basic YWxpY2U6cw==") is False
