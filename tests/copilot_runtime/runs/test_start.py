"""A turn from request to storage: the run's status, messages, log and cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import orjson
import psycopg
import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError
from django.test import override_settings

from conversations.models import Message, Run, RunEvent, RunStatus, Thread
from conversations.services.runs import ThreadBusy
from conversations.store.pg import prepare as pg_prepare
from conversations.store.pg.look_up import LookUp
from conversations.store.pg.pools import conninfo
from copilot_runtime.events import GenerationStart, RunFinished, TextDelta
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.runs import start as service
from copilot_runtime.runs.live import live_run_get
from copilot_runtime.runs.start import turn_prepare, turn_start

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
    return _history_request(thread_id, (message_id, "user", text))


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
    assert (run.model, run.protocol, run.executor) == ("gpt-4o-mini", "graphql", "inline")
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


def _history_request(thread_id: str, *messages: tuple[str, str, str]):
    """A request carrying a whole history: (id, role, content) each."""
    return parse_generate_input(
        {
            "threadId": thread_id,
            "frontend": {"actions": []},
            "messages": [
                {
                    "id": message_id,
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "textMessage": {"content": content, "role": role},
                }
                for message_id, role, content in messages
            ],
            "metadata": {"requestType": "Chat"},
        },
        {},
    )


async def _until(condition, what: str) -> None:
    for _ in range(400):
        if await condition():
            return
        await asyncio.sleep(0.0125)
    raise AssertionError(f"never: {what}")


@pytest.fixture
def sql_store(runtime_on_fake: Any, pg_turn_store: None) -> None:
    """The raw-SQL store these tests are about, on the fake upstream."""


async def test_the_model_is_asked_while_the_turns_write_is_in_flight(
    sql_store, fake_upstream
) -> None:
    """Inline, the run starts once the thread has been read: the model request goes out while
    the turn's write (run, new messages, thread status) is still on its way to the database,
    and the turn starts for the client once that write has committed."""
    first_text = _fake({"tokens": 3})
    first = await turn_start(
        user=AnonymousUser(),
        request=_history_request("t-ahead", ("u1", "user", first_text)),
        protocol="graphql",
    )
    await _events_until_finished(first)
    await _run_ended(first.run_id)
    answer = await Message.objects.aget(thread__thread_id="t-ahead", role="assistant")
    asked_before = len(fake_upstream.requests())

    holder = await psycopg.AsyncConnection.connect(conninfo())
    await holder.execute(  # the turn's write updates the thread row: it waits on this lock
        "SELECT 1 FROM conversations_thread WHERE thread_id = %s FOR UPDATE", ["t-ahead"]
    )
    starting = asyncio.create_task(
        turn_start(
            user=AnonymousUser(),
            request=_history_request(
                "t-ahead",
                ("u1", "user", first_text),
                (answer.message_id, "assistant", answer.content),
                ("u2", "user", _fake({"tokens": 3})),
            ),
            protocol="graphql",
        )
    )
    try:

        async def model_asked() -> bool:
            return len(fake_upstream.requests()) > asked_before

        await _until(model_asked, "the model was asked while the write waited")
        assert not starting.done()
        assert not await Message.objects.filter(message_id="u2").aexists()
    finally:
        await holder.rollback()
        await holder.close()

    started = await asyncio.wait_for(starting, 10)
    await _events_until_finished(started)
    run = await _run_ended(started.run_id)
    assert run.status == RunStatus.SUCCEEDED
    stored = [
        m.message_id
        async for m in Message.objects.filter(thread__thread_id="t-ahead").order_by("position")
    ]
    assert stored[:3] == ["u1", answer.message_id, "u2"] and len(stored) == 4


async def test_a_run_whose_turn_write_fails_is_stopped_and_stores_nothing(
    sql_store, fake_upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request that raced another onto the thread (its read saw no active run; the other's
    run was written first): its run, already asking the model, is stopped, nothing of it is
    stored, and the request is refused as THREAD_BUSY."""
    first_text = _fake({"hang": True})
    hanging = await turn_start(
        user=AnonymousUser(),
        request=_history_request("t-raced", ("u1", "user", first_text)),
        protocol="graphql",
    )
    seen = pg_prepare.look

    async def blind_to_active_runs(look_up: LookUp) -> tuple[Any, ...]:
        row = await seen(look_up)
        return (*row[:3], None, *row[4:])

    monkeypatch.setattr(pg_prepare, "look", blind_to_active_runs)

    with pytest.raises(ThreadBusy):
        await turn_start(
            user=AnonymousUser(),
            request=_history_request(
                "t-raced", ("u1", "user", first_text), ("u2", "user", _fake({"hang": True}))
            ),
            protocol="graphql",
            run_id="refused-run",
        )

    async def stopped() -> bool:
        # Its model request (one that would hang forever) closed, if it went out at all:
        # only the first turn's is still open.
        return live_run_get("refused-run") is None and fake_upstream.stats()["active"] == 1

    await _until(stopped, "the refused turn's run ended")
    assert not await Run.objects.filter(pk="refused-run").aexists()
    assert not await RunEvent.objects.filter(run_id="refused-run").aexists()
    assert not await Message.objects.filter(message_id="u2").aexists()
    assert await started_and_cancelled(hanging)


async def test_a_taken_client_run_id_never_displaces_the_live_run_that_has_it(
    sql_store, fake_upstream
) -> None:
    """A client's own run id (v2) is proved unused only by the turn's write: a request reusing
    the id of a run still live in this process is refused before anything of its own runs, and
    the live run keeps its fan-out and can still be stopped."""
    hanging = await turn_start(
        user=AnonymousUser(),
        request=_history_request("t-first", ("u1", "user", _fake({"hang": True}))),
        protocol="agui",
        run_id="client-run-1",
    )
    live = live_run_get("client-run-1")
    assert live is not None

    async def hanging_asked() -> bool:
        return fake_upstream.stats()["active"] == 1

    await _until(hanging_asked, "the first run's model request is open")
    asked_before = len(fake_upstream.requests())

    with pytest.raises(IntegrityError):
        await turn_start(
            user=AnonymousUser(),
            request=_history_request("t-second", ("u1", "user", _fake({"tokens": 3}))),
            protocol="agui",
            run_id="client-run-1",
        )

    assert live_run_get("client-run-1") is live
    assert len(fake_upstream.requests()) == asked_before  # no model asked for the refused turn
    assert await started_and_cancelled(hanging)
    assert (await Run.objects.aget(pk="client-run-1")).status == RunStatus.CANCELLED


async def started_and_cancelled(started) -> bool:
    cancelled = await started.cancel()
    await _run_ended(started.run_id)
    return cancelled


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
