"""``manage.py apitoken issue|list|revoke``."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from pytest_django.fixtures import Settings

from copilot_runtime.models import TOKEN_PREFIX, ApiToken, token_hash

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def run(*args: str) -> str:
    out = StringIO()
    call_command("apitoken", *args, stdout=out)
    return out.getvalue()


def issue(username: str, name: str) -> tuple[ApiToken, str]:
    output = run("issue", "--user", username, "--name", name)
    raw_tokens = [word for word in output.split() if word.startswith(TOKEN_PREFIX)]
    assert len(raw_tokens) == 1, output
    raw = raw_tokens[0]
    assert output.count(raw) == 1
    return ApiToken.objects.get(token_hash=token_hash(raw)), raw


def test_issue_prints_the_raw_token_once_and_stores_its_hash(user: Any) -> None:
    token, raw = issue("alice", "ci bot")

    assert (token.user, token.name) == (user, "ci bot")
    assert token.token_prefix == raw[:10]
    assert token.revoked_at is None


def test_issue_for_an_unknown_user_fails() -> None:
    with pytest.raises(CommandError, match="nobody"):
        run("issue", "--user", "nobody", "--name", "x")

    assert not ApiToken.objects.exists()


def test_list_shows_tokens_but_never_their_secret(user: Any, other_user: Any) -> None:
    alices, alices_raw = issue("alice", "alice laptop")
    bobs, bobs_raw = issue("bob", "bob server")

    listing = run("list")

    assert alices_raw not in listing
    assert bobs_raw not in listing
    assert "alice laptop" in listing and "bob server" in listing
    assert alices.token_prefix in listing
    assert f"#{bobs.pk}" in listing
    assert "active" in listing


def test_list_filters_by_user(user: Any, other_user: Any) -> None:
    issue("alice", "alice laptop")
    issue("bob", "bob server")

    listing = run("list", "--user", "bob")

    assert "bob server" in listing
    assert "alice laptop" not in listing


def test_revoke_sets_revoked_at(user: Any) -> None:
    token, _raw = issue("alice", "ci")

    output = run("revoke", str(token.pk))

    token.refresh_from_db()
    assert token.revoked_at is not None
    assert f"#{token.pk}" in output
    assert "revoked" in run("list")


def test_revoke_of_an_unknown_token_fails() -> None:
    with pytest.raises(CommandError):
        run("revoke", "999999")
