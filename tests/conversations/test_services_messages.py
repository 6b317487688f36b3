"""``messages_sync_input`` (the client's history, idempotently) and ``messages_store_output``."""

from __future__ import annotations

import datetime as dt

import pytest

from conversations.models import Message, Run, Thread
from conversations.services.messages import (
    OutputMessage,
    messages_store_output,
    messages_sync_input,
)
from conversations.services.runs import run_create
from copilot_runtime.events.request import InputMessage
from tests.conversations.factories import text_input, thread_create

pytestmark = pytest.mark.django_db


def new_run(thread: Thread) -> Run:
    # One run at a time per thread: the previous turn's run has ended.
    Run.objects.filter(thread=thread, status__in=["pending", "running"]).update(status="succeeded")
    return run_create(
        thread=thread,
        agent_name="default",
        protocol="graphql",
        request_type="Chat",
        previous_run_id=None,
    )


def sync(thread: Thread, *messages: InputMessage) -> Run:
    run = new_run(thread)
    messages_sync_input(thread=thread, messages=list(messages), run=run)
    return run


def current_ids(thread: Thread) -> list[str]:
    """What the thread holds now: the rows not superseded, in position order."""
    return list(
        Message.objects.filter(thread=thread, superseded=False)
        .order_by("position")
        .values_list("message_id", flat=True)
    )


def all_rows(thread: Thread) -> list[tuple[int, str, bool]]:
    return list(
        Message.objects.filter(thread=thread)
        .order_by("position")
        .values_list("position", "message_id", "superseded")
    )


def assistant(message_id: str) -> InputMessage:
    return text_input(message_id, role="assistant")


# --- the client's history ---------------------------------------------------------------------


def test_first_request_stores_the_history_in_order() -> None:
    thread = thread_create()
    run = sync(thread, text_input("u1", "Hi"), assistant("a1"), text_input("u2", "More"))

    rows = list(Message.objects.filter(thread=thread).order_by("position"))
    assert [(r.position, r.message_id, r.role, r.kind) for r in rows] == [
        (0, "u1", "user", "text"),
        (1, "a1", "assistant", "text"),
        (2, "u2", "user", "text"),
    ]
    assert rows[0].content == "Hi"
    assert all(r.run_id == run.id for r in rows)
    assert not any(r.superseded for r in rows)


def test_resending_history_does_not_duplicate_messages() -> None:
    thread = thread_create()
    history = [text_input("u1"), assistant("a1"), text_input("u2")]
    sync(thread, *history)

    sync(thread, *history)
    sync(thread, *history)

    assert all_rows(thread) == [(0, "u1", False), (1, "a1", False), (2, "u2", False)]


def test_new_messages_are_appended_with_dense_positions() -> None:
    thread = thread_create()
    sync(thread, text_input("u1"))
    run = new_run(thread)
    messages_store_output(run=run, messages=[OutputMessage(message_id="a1", kind="text")])

    sync(thread, text_input("u1"), assistant("a1"), text_input("u2"), text_input("u3"))

    assert all_rows(thread) == [
        (0, "u1", False),
        (1, "a1", False),
        (2, "u2", False),
        (3, "u3", False),
    ]


def test_regenerate_supersedes_the_later_rows_without_deleting_them() -> None:
    thread = thread_create()
    sync(thread, text_input("u1"), assistant("a1"), text_input("u2"), assistant("a2"))

    # A regenerate of the last answer: the client sends its history up to the question.
    sync(thread, text_input("u1"), assistant("a1"), text_input("u2"))

    assert all_rows(thread) == [
        (0, "u1", False),
        (1, "a1", False),
        (2, "u2", False),
        (3, "a2", True),
    ]
    assert current_ids(thread) == ["u1", "a1", "u2"]


def test_divergent_edit_supersedes_from_the_divergence() -> None:
    thread = thread_create()
    sync(thread, text_input("u1"), assistant("a1"), text_input("u2"), assistant("a2"))

    # The user edited u2: the client's history now ends with a new message in its place.
    sync(thread, text_input("u1"), assistant("a1"), text_input("u2-edited"))

    assert all_rows(thread) == [
        (0, "u1", False),
        (1, "a1", False),
        (2, "u2", True),
        (3, "a2", True),
        (4, "u2-edited", False),
    ]
    assert current_ids(thread) == ["u1", "a1", "u2-edited"]


def test_divergence_at_the_first_message_supersedes_everything_stored() -> None:
    thread = thread_create()
    sync(thread, text_input("u1"), assistant("a1"))

    sync(thread, text_input("x1"))

    assert current_ids(thread) == ["x1"]
    assert Message.objects.filter(thread=thread, superseded=True).count() == 2


def test_a_new_answer_after_a_regenerate_follows_the_kept_history() -> None:
    thread = thread_create()
    sync(thread, text_input("u1"), assistant("a1"))
    run = sync(thread, text_input("u1"))

    messages_store_output(run=run, messages=[OutputMessage(message_id="a1-again", kind="text")])

    assert current_ids(thread) == ["u1", "a1-again"]
    assert [p for p, _, _ in all_rows(thread)] == [0, 1, 2]


def test_client_system_and_developer_messages_are_not_stored() -> None:
    thread = thread_create()
    sync(
        thread,
        text_input("sys-1", "You are helpful", role="system"),
        text_input("dev-1", "Be brief", role="developer"),
        text_input("u1"),
    )
    # The frontend rebuilds its instructions with fresh ids on every request.
    sync(
        thread,
        text_input("sys-2", "You are helpful", role="system"),
        text_input("u1"),
        text_input("dev-2", "Be brief", role="developer"),
    )

    assert all_rows(thread) == [(0, "u1", False)]


def test_messages_without_ids_get_generated_ids() -> None:
    thread = thread_create()
    sync(thread, text_input("", "first"), text_input("", "second"))

    ids = list(Message.objects.filter(thread=thread).values_list("message_id", flat=True))
    assert len(ids) == 2
    assert all(ids)
    assert len(set(ids)) == 2


def test_tool_calls_results_and_images_are_stored_with_their_fields() -> None:
    thread = thread_create()
    created = dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)
    sync(
        thread,
        text_input("u1", "What is the weather?"),
        InputMessage(
            id="call-1",
            kind="action_execution",
            role="assistant",
            action_name="getWeather",
            arguments={"city": "Paris"},
            parent_message_id="a1",
            created_at=created,
        ),
        InputMessage(
            id="res-1",
            kind="result",
            role="tool",
            action_name="getWeather",
            action_execution_id="call-1",
            result="sunny",
        ),
        InputMessage(id="img-1", kind="image", role="user", image_format="png", image_bytes="AAAA"),
    )

    call = Message.objects.get(thread=thread, message_id="call-1")
    assert (call.kind, call.action_name, call.arguments, call.parent_message_id) == (
        "action_execution",
        "getWeather",
        {"city": "Paris"},
        "a1",
    )
    assert call.created_at == created
    result = Message.objects.get(thread=thread, message_id="res-1")
    assert (result.kind, result.action_execution_id, result.result) == ("result", "call-1", "sunny")
    image = Message.objects.get(thread=thread, message_id="img-1")
    assert (image.kind, image.image_format, image.image_bytes) == ("image", "png", "AAAA")


def test_resending_history_with_an_agent_state_message_does_not_supersede_anything() -> None:
    thread = thread_create()
    history = [
        text_input("u1"),
        InputMessage(
            id="state-1",
            kind="agent_state",
            role="assistant",
            action_name="default",
            agent_state={"step": 1},
        ),
        assistant("a1"),
    ]
    sync(thread, *history)

    sync(thread, *history)

    assert not Message.objects.filter(thread=thread, superseded=True).exists()
    assert Message.objects.filter(thread=thread).count() == 3


def test_deleting_a_middle_message_keeps_the_later_ones_current() -> None:
    thread = thread_create()
    sync(thread, text_input("u1"), assistant("a1"), text_input("u2"), assistant("a2"))

    # The client deleted a1 (useCopilotChat's deleteMessage) and asks again.
    sync(thread, text_input("u1"), text_input("u2"), assistant("a2"), text_input("u3"))

    assert current_ids(thread) == ["u1", "u2", "a2", "u3"]


def test_a_history_that_brings_back_superseded_messages_makes_them_current_again() -> None:
    thread = thread_create()
    sync(thread, text_input("u1"), assistant("a1"), text_input("u2"), assistant("a2"))
    # A second tab, opened before u2, asks something else on the same thread...
    sync(thread, text_input("u1"), assistant("a1"), text_input("u3"))
    # ...then the first tab asks again with its own history, u2 and a2 included.
    sync(
        thread,
        text_input("u1"),
        assistant("a1"),
        text_input("u2"),
        assistant("a2"),
        text_input("u4"),
    )

    assert current_ids(thread) == ["u1", "a1", "u2", "a2", "u4"]


# --- the thread's title -----------------------------------------------------------------------


def test_thread_title_comes_from_the_first_user_message() -> None:
    thread = thread_create()
    sync(
        thread,
        text_input("sys", "System prompt", role="system"),
        assistant("a0"),
        text_input("u1", "  Plan   a\ntrip to Lisbon "),
        text_input("u2", "Something else"),
    )

    thread.refresh_from_db()
    assert thread.title == "Plan a trip to Lisbon"


def test_long_titles_are_truncated_to_80_characters_with_an_ellipsis() -> None:
    thread = thread_create()
    sync(thread, text_input("u1", "word " * 40))

    thread.refresh_from_db()
    assert len(thread.title) == 80
    assert thread.title.endswith("…")
    assert thread.title.startswith("word word")


def test_a_title_of_exactly_80_characters_is_kept_whole() -> None:
    thread = thread_create()
    sync(thread, text_input("u1", "x" * 80))

    thread.refresh_from_db()
    assert thread.title == "x" * 80


def test_the_title_is_set_once() -> None:
    thread = thread_create()
    sync(thread, text_input("u1", "First question"))
    sync(thread, text_input("x1", "A different first question"))

    thread.refresh_from_db()
    assert thread.title == "First question"


def test_no_title_from_a_blank_user_message() -> None:
    thread = thread_create()
    sync(thread, InputMessage(id="u1", kind="text", role="user", content="   "))

    thread.refresh_from_db()
    assert thread.title == ""


# --- a run's output ---------------------------------------------------------------------------


def test_output_messages_are_appended_in_order_after_the_history() -> None:
    thread = thread_create()
    run = sync(thread, text_input("u1"))

    messages_store_output(
        run=run,
        messages=[
            OutputMessage(message_id="a1", kind="text", role="assistant", content="Let me check"),
            OutputMessage(
                message_id="call-1",
                kind="action_execution",
                action_name="search",
                arguments={"q": "x"},
                parent_message_id="a1",
            ),
            OutputMessage(
                message_id="res-1",
                kind="result",
                action_name="search",
                action_execution_id="call-1",
                result="found",
            ),
        ],
    )

    rows = list(Message.objects.filter(thread=thread).order_by("position"))
    assert [(r.position, r.message_id, r.kind) for r in rows] == [
        (0, "u1", "text"),
        (1, "a1", "text"),
        (2, "call-1", "action_execution"),
        (3, "res-1", "result"),
    ]
    assert rows[1].content == "Let me check"
    assert rows[2].arguments == {"q": "x"}
    assert all(r.run_id == run.id for r in rows[1:])


def test_storing_output_twice_is_idempotent() -> None:
    thread = thread_create()
    run = sync(thread, text_input("u1"))
    output = [
        OutputMessage(message_id="a1", kind="text"),
        OutputMessage(message_id="a2", kind="text"),
    ]

    messages_store_output(run=run, messages=output)
    messages_store_output(run=run, messages=output)
    messages_store_output(run=run, messages=[*output, OutputMessage(message_id="a3", kind="text")])

    assert all_rows(thread) == [
        (0, "u1", False),
        (1, "a1", False),
        (2, "a2", False),
        (3, "a3", False),
    ]


def test_storing_no_output_changes_nothing() -> None:
    thread = thread_create()
    run = sync(thread, text_input("u1"))

    messages_store_output(run=run, messages=[])

    assert all_rows(thread) == [(0, "u1", False)]


def test_failed_output_messages_keep_their_status() -> None:
    thread = thread_create()
    run = sync(thread, text_input("u1"))

    messages_store_output(
        run=run,
        messages=[
            OutputMessage(message_id="a1", kind="text", status="failed", status_reason="boom")
        ],
    )

    stored = Message.objects.get(thread=thread, message_id="a1")
    assert (stored.status, stored.status_reason) == ("failed", "boom")
