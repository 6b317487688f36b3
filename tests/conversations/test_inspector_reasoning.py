"""The session inspector shows a run's reasoning (its stored rows, or the log of a run from
before they were stored), folded, before the answer it led to; a block that stopped before
any answer is shown at the run's end."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations.models import RunEvent
from copilot_runtime.events import ReasoningDelta, ReasoningEnd, ReasoningStart
from copilot_runtime.events.reasoning import sealed_value
from tests.conversations.factories import message_row, run_row, thread_create

pytestmark = pytest.mark.django_db


def _log(run: Any, *events: Any) -> None:
    for seq, event in enumerate(events, start=1):
        RunEvent.objects.create(run=run, seq=seq, type=event.type, payload=event.to_payload())


def test_reasoning_is_folded_before_the_answer_and_marked_when_signed(
    admin_client: Client,
) -> None:
    thread = thread_create()
    first = run_row(thread=thread, status="succeeded")
    message_row(thread=thread, position=0, role="user", content="What is 2+2?", run=first)
    message_row(thread=thread, position=1, role="assistant", content="It is 4.", run=first)
    _log(
        first,
        ReasoningStart(message_id="rs1"),
        ReasoningDelta(message_id="rs1", delta="Two plus "),
        ReasoningDelta(message_id="rs1", delta="<b>two</b>."),
        ReasoningEnd(message_id="rs1", encrypted_value=sealed_value(signature="sig")),
    )
    second = run_row(thread=thread, status="cancelled")
    message_row(thread=thread, position=2, role="user", content="And 3+3?", run=second)
    _log(second, ReasoningStart(message_id="rs2"), ReasoningDelta(message_id="rs2", delta="Six"))
    # A block the run closed is logged with its end; one cut short has none and is not shown.
    third = run_row(thread=thread, status="succeeded")
    message_row(thread=thread, position=3, role="user", content="And 4+4?", run=third)
    _log(third, ReasoningStart(message_id="rs3"), ReasoningEnd(message_id="rs3"))

    url = reverse("admin:conversations_thread_inspect", args=[thread.pk])
    response = admin_client.get(url)
    assert response.status_code == 200
    page = response.content.decode()

    question = page.index("What is 2+2?")
    folded = page.index('<details class="ins-entry ins-reasoning">')
    answer = page.index("It is 4.")
    assert question < folded < answer
    assert "Reasoning · signed · 20 characters" in page
    assert "Two plus &lt;b&gt;two&lt;/b&gt;." in page  # shown as text
    assert "Six" not in page
    # The third run's empty block: at its end, after its question, not signed.
    assert page.count("ins-reasoning") == 2
    assert page.index("Reasoning · 0 characters") > page.index("And 4+4?")


def test_stored_reasoning_is_folded_in_place_and_its_logged_copy_not_shown_again(
    admin_client: Client,
) -> None:
    thread = thread_create()
    run = run_row(thread=thread, status="succeeded")
    message_row(thread=thread, position=0, role="user", content="What is 2+2?", run=run)
    message_row(
        thread=thread,
        position=1,
        kind="reasoning",
        role="reasoning",
        content="Stored thinking.",
        arguments={"encryptedValue": sealed_value(signature="sig")},
        run=run,
    )
    message_row(thread=thread, position=2, role="assistant", content="It is 4.", run=run)
    _log(
        run,
        ReasoningStart(message_id="rs1"),
        ReasoningDelta(message_id="rs1", delta="Stored thinking."),
        ReasoningEnd(message_id="rs1", encrypted_value=sealed_value(signature="sig")),
    )

    url = reverse("admin:conversations_thread_inspect", args=[thread.pk])
    page = admin_client.get(url).content.decode()

    assert page.count("ins-reasoning") == 1
    assert page.index("What is 2+2?") < page.index("Reasoning · signed · 16 characters")
    assert page.index("Reasoning · signed") < page.index("It is 4.")
