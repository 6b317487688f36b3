"""Another caller's thread is answered exactly like a thread that does not exist."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from copilot_runtime.auth import do_issue_token
from tests.conversations.factories import message_row, state_row, thread_create
from tests.copilot_runtime.http.helpers import body_of, load_agent_state

pytestmark = pytest.mark.django_db

MISSING_THREAD_ID = "thread-that-does-not-exist"


def answer_without_thread_id(client: Client, thread_id: str, **headers: str) -> dict[str, Any]:
    """The whole JSON body, with the echoed threadId taken out for comparison."""
    response = load_agent_state(client, thread_id=thread_id, headers=headers)
    assert response.status_code == 200
    body = body_of(response)
    answered = body["data"]["loadAgentState"]
    assert answered.pop("threadId") == thread_id
    return {"body": body, "content_type": response["Content-Type"]}


@pytest.fixture
def alices_thread(user: Any) -> str:
    thread = thread_create(thread_id="alices-private-thread", owner=user)
    message_row(thread=thread, position=0, message_id="m1", role="user", content="my secret")
    state_row(thread=thread, state={"secret": True})
    return thread.thread_id


@pytest.fixture
def anonymous_thread() -> str:
    thread = thread_create(thread_id="anonymous-thread", owner=None)
    message_row(thread=thread, position=0, message_id="m1", role="user", content="anon")
    return thread.thread_id


def test_the_owner_sees_their_thread(client: Client, user: Any, alices_thread: str) -> None:
    client.force_login(user)

    answered = answer_without_thread_id(client, alices_thread)["body"]["data"]["loadAgentState"]

    assert answered["threadExists"] is True
    assert "my secret" in answered["messages"]


def test_another_user_gets_the_answer_for_a_missing_thread(
    client: Client, other_user: Any, alices_thread: str
) -> None:
    client.force_login(other_user)

    theirs = answer_without_thread_id(client, alices_thread)
    missing = answer_without_thread_id(client, MISSING_THREAD_ID)

    assert theirs == missing
    assert theirs["body"]["data"]["loadAgentState"]["threadExists"] is False


def test_another_users_token_gets_the_answer_for_a_missing_thread(
    client: Client, other_user: Any, alices_thread: str
) -> None:
    _token, raw = do_issue_token(user=other_user, name="bob's bot")
    auth = {"Authorization": f"Bearer {raw}"}

    theirs = answer_without_thread_id(client, alices_thread, **auth)
    missing = answer_without_thread_id(client, MISSING_THREAD_ID, **auth)

    assert theirs == missing


def test_an_anonymous_caller_gets_the_answer_for_a_missing_thread(
    client: Client, alices_thread: str
) -> None:
    theirs = answer_without_thread_id(client, alices_thread)
    missing = answer_without_thread_id(client, MISSING_THREAD_ID)

    assert theirs == missing


def test_anonymous_threads_are_not_shown_to_logged_in_users(
    client: Client, user: Any, anonymous_thread: str
) -> None:
    assert (
        answer_without_thread_id(client, anonymous_thread)["body"]["data"]["loadAgentState"][
            "threadExists"
        ]
        is True
    )
    client.force_login(user)

    theirs = answer_without_thread_id(client, anonymous_thread)
    missing = answer_without_thread_id(client, MISSING_THREAD_ID)

    assert theirs == missing
