"""A turn from request to storage: the run's status, messages, log and cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from conversations.models import Message, Run, RunEvent, RunStatus, Thread
from conversations.services.runs import ThreadBusy
from copilot_runtime.engine import service
from copilot_runtime.engine.service import turn_prepare, turn_start
from copilot_runtime.events import GenerationStart, RunFinished, TextDelta
from copilot_runtime.graphql.turn_input import parse_generate_input

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def runtime_on_fake(fake_upstream) -> Iterator[None]:
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
            "ACTIONS": ["tests.support.actions.server_add"],
            "EVENT_FLUSH_MS": 5,
        }
    ):
        yield


def _request(text: str, *, thread_id: str = "thread-1", message_id: str = "u1"):
    return parse_generate_input(
        {
            "threadId": thread_id,
            "frontend": {"actions": []},
            "messages": [
                {
                    "id": message_id,
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "textMessage": {"content": text, "role": "user"},
                }
            ],
            "metadata": {"requestType": "Chat"},
        },
        {},
    )


def _fake(directive: dict[str, Any]) -> str:
    return "FAKE: " + orjson.dumps(directive).decode()


async def _run_ended(run_id: str) -> Run:
    for _ in range(200):
        run = await Run.objects.aget(pk=run_id)
        if run.is_finished:
            return run
        await asyncio.sleep(0.025)
    raise AssertionError(f"run {run_id} did not end")


async def _events_until_finished(started) -> list[Any]:
    events = []
    while (event := await asyncio.wait_for(started.events.get(), 10)) is not None:
        events.append(event)
    return events


async def test_a_finished_turn_is_stored_with_its_log_and_usage(runtime_on_fake) -> None:
    started = await turn_start(
        user=AnonymousUser(), request=_request(_fake({"tokens": 300})), protocol="graphql"
    )
    events = await _events_until_finished(started)

    assert isinstance(events[-1], RunFinished)
    run = await _run_ended(started.run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.model == "gpt-4o-mini"
    assert run.output_tokens > 0 and run.input_tokens > 0
    assert run.first_token_at is not None and run.finished_at is not None

    rows = [
        (m.kind, m.role, m.content)
        async for m in Message.objects.filter(thread__thread_id="thread-1").order_by("position")
    ]
    reply = "".join(e.delta for e in events if isinstance(e, TextDelta))
    assert rows == [("text", "user", _fake({"tokens": 300})), ("text", "assistant", reply)]

    log = [e async for e in RunEvent.objects.filter(run_id=run.pk).order_by("seq")]
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    # Deltas are coalesced: far fewer rows than tokens, yet the text is all there.
    deltas = [e for e in log if e.type == "text_delta"]
    assert len(deltas) < 300
    assert "".join(e.payload["delta"] for e in deltas) == reply
    assert log[-1].type == "run_finished"
    thread = await Thread.objects.aget(thread_id="thread-1")
    assert thread.status == "idle"
    assert thread.title.startswith("FAKE:")


async def test_an_inline_run_goes_first_up_to_its_first_event(
    runtime_on_fake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's first event (the chat engine emits it just before the model request goes out)
    is there when ``turn_start`` returns: the model works on the request while the answer to
    the client starts, not after it."""
    monkeypatch.setattr(service, "RUN_HEAD_START_SECONDS", 30.0)  # only the event ends the wait
    started = await turn_start(
        user=AnonymousUser(), request=_request(_fake({"hang": True})), protocol="graphql"
    )

    assert not started.events.empty()
    assert isinstance(started.events.get_nowait(), GenerationStart)
    assert await started.cancel() is True
    await _run_ended(started.run_id)


async def test_a_second_request_on_a_running_thread_is_refused(runtime_on_fake) -> None:
    started = await turn_start(
        user=AnonymousUser(), request=_request(_fake({"hang": True})), protocol="graphql"
    )
    with pytest.raises(ThreadBusy) as refused:
        await turn_prepare(
            user=AnonymousUser(), request=_request("again", message_id="u2"), protocol="graphql"
        )
    assert refused.value.code == "THREAD_BUSY"
    assert await started.cancel() is True
    await _run_ended(started.run_id)


async def test_cancelling_closes_the_upstream_and_keeps_the_partial_answer(
    runtime_on_fake, fake_upstream
) -> None:
    closed_before = fake_upstream.stats()["client_closed"]
    started = await turn_start(
        user=AnonymousUser(),
        request=_request(_fake({"tokens": 500, "delay_ms": 20})),
        protocol="graphql",
    )
    received = []
    while len(received) < 5:
        event = await asyncio.wait_for(started.events.get(), 10)
        if isinstance(event, TextDelta):
            received.append(event.delta)
    assert await started.cancel() is True
    run = await _run_ended(started.run_id)
    assert run.status == RunStatus.CANCELLED
    assert run.error_code == "CANCELLED"
    partial = await Message.objects.aget(thread__thread_id="thread-1", role="assistant")
    assert partial.content.startswith("".join(received))
    assert partial.status == "failed"
    assert "stopped" in partial.status_reason
    for _ in range(50):
        if fake_upstream.stats()["client_closed"] > closed_before:
            break
        await asyncio.sleep(0.1)
    assert fake_upstream.stats()["client_closed"] > closed_before


async def test_an_upstream_error_fails_the_run_with_its_code(runtime_on_fake) -> None:
    started = await turn_start(
        user=AnonymousUser(),
        request=_request(_fake({"error": {"status": 500, "message": "boom"}})),
        protocol="graphql",
    )
    await _events_until_finished(started)
    run = await _run_ended(started.run_id)
    assert run.status == RunStatus.FAILED
    assert run.error_code == "UPSTREAM_SERVER_ERROR"
    assert run.error_details["statusCode"] == 500
