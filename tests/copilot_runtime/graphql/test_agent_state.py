"""``agent_state_load`` and the message JSON the CopilotKit client loads, with ownership."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser

from conversations.selectors import agent_state_latest, thread_get_for_caller
from copilot_runtime.graphql.agent_state import (
    AgentStateLoad,
    agent_state_load,
    thread_messages_as_copilotkit_json,
)
from tests.conversations.factories import message_row, state_row, thread_create

pytestmark = pytest.mark.django_db

CREATED = dt.datetime(2024, 1, 2, 3, 4, 5, 678_000, tzinfo=dt.UTC)
CREATED_JSON = "2024-01-02T03:04:05.678Z"


def without_thread_id(loaded: AgentStateLoad) -> AgentStateLoad:
    return dataclasses.replace(loaded, thread_id="")


# --- existence and ownership ------------------------------------------------------------------


def test_unknown_thread_does_not_exist() -> None:
    loaded = agent_state_load(thread_id="nope", agent_name="default", user=AnonymousUser())

    assert loaded == AgentStateLoad(thread_id="nope", thread_exists=False, state={}, messages=[])


def test_another_users_thread_is_answered_like_an_unknown_one(user: Any, other_user: Any) -> None:
    thread = thread_create(owner=user)
    message_row(thread=thread, position=0, content="secret")
    state_row(thread=thread, state={"secret": True})

    theirs = agent_state_load(thread_id=thread.thread_id, agent_name="default", user=other_user)
    unknown = agent_state_load(thread_id="missing", agent_name="default", user=other_user)

    assert theirs.thread_id == thread.thread_id
    assert without_thread_id(theirs) == without_thread_id(unknown)
    assert theirs.thread_exists is False


def test_the_owner_sees_their_thread(user: Any) -> None:
    thread = thread_create(owner=user)
    message_row(thread=thread, position=0, message_id="m1", content="Hello", role="user")
    state_row(thread=thread, state={"step": 1})

    loaded = agent_state_load(thread_id=thread.thread_id, agent_name="default", user=user)

    assert loaded.thread_exists is True
    assert loaded.state == {"step": 1}
    assert [m["id"] for m in loaded.messages] == ["m1"]


def test_a_users_thread_is_hidden_from_anonymous_callers(user: Any) -> None:
    thread = thread_create(owner=user)

    loaded = agent_state_load(
        thread_id=thread.thread_id, agent_name="default", user=AnonymousUser()
    )

    assert loaded.thread_exists is False
    assert thread_get_for_caller(thread_id=thread.thread_id, user=AnonymousUser()) is None


def test_anonymous_threads_are_visible_to_anonymous_callers_only(user: Any) -> None:
    thread = thread_create(owner=None)
    state_row(thread=thread, state={"anon": 1})

    anonymous = agent_state_load(
        thread_id=thread.thread_id, agent_name="default", user=AnonymousUser()
    )
    logged_in = agent_state_load(thread_id=thread.thread_id, agent_name="default", user=user)

    assert anonymous.thread_exists is True
    assert anonymous.state == {"anon": 1}
    assert logged_in == AgentStateLoad(thread_id=thread.thread_id, thread_exists=False)


def test_a_deleted_users_threads_do_not_become_visible_to_anonymous_callers(
    django_user_model: Any,
) -> None:
    carol = django_user_model.objects.create_user(username="carol", password="x" * 20)
    thread = thread_create(owner=carol)
    message_row(thread=thread, position=0, content="carol's private notes")

    carol.delete()

    loaded = agent_state_load(
        thread_id=thread.thread_id, agent_name="default", user=AnonymousUser()
    )
    assert loaded.thread_exists is False
    assert loaded.messages == []


# --- agent state ------------------------------------------------------------------------------


def test_the_latest_agent_state_wins() -> None:
    thread = thread_create()
    state_row(thread=thread, state={"step": 1})
    state_row(thread=thread, state={"step": 2})
    state_row(thread=thread, state={"step": 3})
    state_row(thread=thread, state={"elsewhere": True}, agent_name="other-agent")

    loaded = agent_state_load(
        thread_id=thread.thread_id, agent_name="default", user=AnonymousUser()
    )

    assert loaded.state == {"step": 3}
    assert agent_state_latest(thread=thread, agent_name="other-agent").state == {"elsewhere": True}


def test_a_thread_without_state_answers_an_empty_state() -> None:
    thread = thread_create()
    state_row(thread=thread, state={"other": 1}, agent_name="other-agent")

    loaded = agent_state_load(
        thread_id=thread.thread_id, agent_name="default", user=AnonymousUser()
    )

    assert loaded.thread_exists is True
    assert loaded.state == {}


# --- messages as the client loads them ---------------------------------------------------------


def test_messages_exclude_superseded_rows_and_follow_positions() -> None:
    thread = thread_create()
    message_row(thread=thread, position=3, message_id="a2", role="assistant")
    message_row(thread=thread, position=0, message_id="u1", role="user")
    message_row(thread=thread, position=1, message_id="a1-old", role="assistant", superseded=True)
    message_row(thread=thread, position=2, message_id="a1", role="assistant")

    assert [m["id"] for m in thread_messages_as_copilotkit_json(thread=thread)] == [
        "u1",
        "a1",
        "a2",
    ]


def test_text_message_json() -> None:
    thread = thread_create()
    message_row(
        thread=thread, position=0, message_id="u1", role="user", content="Hi", created_at=CREATED
    )
    message_row(
        thread=thread,
        position=1,
        message_id="a1",
        role="assistant",
        content="Hello!",
        parent_message_id="u1",
        created_at=CREATED,
    )

    assert thread_messages_as_copilotkit_json(thread=thread) == [
        {"id": "u1", "role": "user", "content": "Hi", "createdAt": CREATED_JSON},
        {
            "id": "a1",
            "role": "assistant",
            "content": "Hello!",
            "createdAt": CREATED_JSON,
            "parentMessageId": "u1",
        },
    ]


def test_tool_call_json_has_object_arguments() -> None:
    thread = thread_create()
    message_row(
        thread=thread,
        position=0,
        message_id="call-1",
        kind="action_execution",
        action_name="getWeather",
        arguments={"city": "Paris", "days": 2},
        parent_message_id="a1",
        created_at=CREATED,
    )
    message_row(
        thread=thread,
        position=1,
        message_id="call-2",
        kind="action_execution",
        action_name="noArgs",
        arguments=None,
        created_at=CREATED,
    )

    assert thread_messages_as_copilotkit_json(thread=thread) == [
        {
            "id": "call-1",
            "createdAt": CREATED_JSON,
            "name": "getWeather",
            "arguments": {"city": "Paris", "days": 2},
            "parentMessageId": "a1",
        },
        {
            "id": "call-2",
            "createdAt": CREATED_JSON,
            "name": "noArgs",
            "arguments": {},
            "parentMessageId": None,
        },
    ]


def test_result_message_json() -> None:
    thread = thread_create()
    message_row(
        thread=thread,
        position=0,
        message_id="res-1",
        kind="result",
        action_name="getWeather",
        action_execution_id="call-1",
        result='{"temp": 21}',
        created_at=CREATED,
    )

    assert thread_messages_as_copilotkit_json(thread=thread) == [
        {
            "id": "res-1",
            "createdAt": CREATED_JSON,
            "actionExecutionId": "call-1",
            "actionName": "getWeather",
            "result": '{"temp": 21}',
        }
    ]


def test_image_message_json() -> None:
    thread = thread_create()
    message_row(
        thread=thread,
        position=0,
        message_id="img-1",
        kind="image",
        role="user",
        image_format="jpeg",
        image_bytes="/9j/4AAQ",
        created_at=CREATED,
    )

    assert thread_messages_as_copilotkit_json(thread=thread) == [
        {
            "id": "img-1",
            "createdAt": CREATED_JSON,
            "format": "jpeg",
            "bytes": "/9j/4AAQ",
            "role": "user",
        }
    ]


def test_what_a_v1_message_cannot_hold_is_left_out() -> None:
    # A v2 client's image by URL, its document and the model's reasoning: a v1 client has
    # no message for them (its image message holds base64 bytes).
    thread = thread_create()
    message_row(thread=thread, position=0, message_id="u1", role="user", content="Look")
    message_row(
        thread=thread,
        position=1,
        kind="image",
        role="user",
        image_format="png",
        image_bytes="https://example.com/cat.png",
    )
    message_row(
        thread=thread,
        position=2,
        kind="document",
        role="user",
        content="a.pdf",
        image_format="application/pdf",
        image_bytes="JVBERi0=",
    )
    message_row(thread=thread, position=3, kind="reasoning", role="reasoning", content="Hm.")

    assert [m["id"] for m in thread_messages_as_copilotkit_json(thread=thread)] == ["u1"]


def test_agent_state_rows_are_not_messages() -> None:
    thread = thread_create()
    message_row(thread=thread, position=0, message_id="u1", role="user")
    message_row(
        thread=thread, position=1, message_id="st-1", kind="agent_state", arguments={"x": 1}
    )

    assert [m["id"] for m in thread_messages_as_copilotkit_json(thread=thread)] == ["u1"]
