"""A run's task refers to the thread's history (copilot_runtime/runs/task_history.py): its
message stays the size of the turn, and the worker rebuilds exactly the request the web parsed,
from its cache or from the database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from celery import Celery
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from conversations.models import Run, RunStatus, Thread
from conversations.store.types import PreparedTurn
from copilot_runtime.agui.run_input import (
    agui_history,
    run_input_parse,
    turn_request_from_run_input,
)
from copilot_runtime.events.request import TurnRequest, message_json
from copilot_runtime.graphql.turn_input import parse_generate_input, v1_history
from copilot_runtime.history import HISTORIES
from copilot_runtime.runs import task_history
from copilot_runtime.runs.executor import enqueue_run, placement_of, run_execute_stored
from copilot_runtime.runs.start import turn_prepare
from copilot_runtime.runs.task_history import HistoryUnavailable, request_rebuilt
from tests.support.generate_e2e import generate_data, runtime_settings, text_input

RECEIVE_TIMEOUT = 5.0
ASSISTANT_REPLY = "Here is what I found about that, in a few sentences of ordinary length. " * 4
INSTRUCTIONS = "You are a helpful assistant. Answer briefly and use the tools offered. " * 4


@pytest.fixture
def celery_executor(current_redis_app: Celery, fake_upstream: Any) -> Iterator[Celery]:
    settings = runtime_settings(fake_upstream.base_url, EXECUTOR="celery")
    with override_settings(COPILOT_RUNTIME=settings):
        yield current_redis_app


@pytest.fixture(params=["orm", "pg"])
def store(request: pytest.FixtureRequest) -> str:
    """Either turn store writes the run's history part (the ORM's JSONField, or the raw SQL's
    jsonb parameter)."""
    if request.param == "pg":
        request.getfixturevalue("pg_turn_store")
    return str(request.param)


class Queued:
    def __init__(self, run_id: str, placement: dict[str, Any], body: bytes) -> None:
        self.run_id = run_id
        self.placement = placement
        self.body = body  # the task message's body, as the broker holds it


async def _queue_turn(app: Celery, request: TurnRequest, *, protocol: str = "graphql") -> Queued:
    """Prepare ``request`` under the celery executor; its task as the worker receives it. The
    run is then marked finished, so the thread takes the next turn."""
    prepared = await turn_prepare(user=AnonymousUser(), request=request, protocol=protocol)
    queued = _received(app)
    assert queued.run_id == prepared.run_id
    await Run.objects.filter(pk=queued.run_id).aupdate(status=RunStatus.SUCCEEDED)
    return queued


def _received(app: Celery) -> Queued:
    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue(app.conf.task_default_queue)
        message = queue.get(timeout=RECEIVE_TIMEOUT)
        message.ack()
        queue.close()
    (run_id, placement), _kwargs, _embed = message.decode()
    body = message.body if isinstance(message.body, bytes) else message.body.encode()
    return Queued(run_id, placement, body)


def _v1(thread_id: str, messages: list[dict[str, Any]]) -> TurnRequest:
    """The request the v1 surface parses, its history entered (copilot_runtime/history)."""
    data = generate_data(thread_id=thread_id, messages=messages)
    return parse_generate_input(data, {}, v1_history(data, None))


def _another_worker_ran(placement: dict[str, Any]) -> None:
    """What this process knows as a worker of the task's thread is gone: another worker
    executed the thread's earlier turns."""
    known = HISTORIES.of_thread(placement["thread_pk"])
    if known is not None:
        HISTORIES.discard(known)


def _created(n: int) -> str:
    return f"2025-01-01T00:{n // 60:02d}:{n % 60:02d}.{n % 1000:03d}Z"


def _assistant(message_id: str, n: int, content: str = ASSISTANT_REPLY) -> dict[str, Any]:
    # A v1 client re-sends a reply with the createdAt the runtime gave it (not the row's).
    message = text_input(message_id, content, role="assistant")
    message["createdAt"] = _created(n)
    return message


def _tool_call(call_id: str, parent: str, n: int) -> dict[str, Any]:
    # The keys in an order jsonb would not keep: the model must see them as sent.
    arguments = '{"units":"metric","city":"Paris","days":3,"ratio":1.0,"exact":true}'
    return {
        "id": call_id,
        "createdAt": _created(n),
        "actionExecutionMessage": {
            "name": "forecast",
            "arguments": arguments,
            "parentMessageId": parent,
        },
    }


def _tool_result(result_id: str, call_id: str, n: int) -> dict[str, Any]:
    return {
        "id": result_id,
        "createdAt": _created(n),
        "resultMessage": {
            "result": '{"forecast":"sunny"}',
            "actionExecutionId": call_id,
            "actionName": "forecast",
        },
    }


def _image(image_id: str, n: int) -> dict[str, Any]:
    return {
        "id": image_id,
        "createdAt": _created(n),
        "imageMessage": {"format": "png", "bytes": "iVBORw0KGgoAAAANSUhEUg==", "role": "user"},
    }


def _agent_state(state_id: str, n: int) -> dict[str, Any]:
    return {
        "id": state_id,
        "createdAt": _created(n),
        "agentStateMessage": {
            "threadId": "ignored",
            "agentName": "default",
            "state": '{"step":2,"done":false,"ratio":1.0,"notes":{"b":1,"a":2}}',
            "role": "assistant",
            "running": False,
            "nodeName": "",
            "runId": "",
            "active": False,
        },
    }


def _conversation(turns: int) -> list[list[dict[str, Any]]]:
    """The histories a v1 client sends over ``turns`` turns: its instructions first (a fresh
    id every time), tool calls with their results, an image, an agent's state, replies."""
    history: list[dict[str, Any]] = []
    sent: list[list[dict[str, Any]]] = []
    for turn in range(turns):
        if turn:
            history.append(_assistant(f"a{turn}", 10 * turn))
            if turn % 2 == 0:
                history.append(_tool_call(f"call{turn}", f"a{turn}", 10 * turn + 1))
                history.append(_tool_result(f"result{turn}", f"call{turn}", 10 * turn + 2))
            if turn == 3:
                history.append(_agent_state(f"state{turn}", 10 * turn + 3))
        history.append(text_input(f"u{turn}", f"question {turn}"))
        if turn == 2:
            history.append(_image(f"img{turn}", 10 * turn + 4))
        instructions = text_input(f"sys-{turn}", INSTRUCTIONS, role="system")
        sent.append([instructions, *history])
    return sent


def _forms(request: TurnRequest) -> list[bytes]:
    return [message_json(message) for message in request.messages]


def _assert_same(rebuilt: TurnRequest, parsed: TurnRequest) -> None:
    assert rebuilt == parsed
    # Byte for byte, so also the types and the keys' order equality does not see.
    assert _forms(rebuilt) == _forms(parsed)
    assert rebuilt.thread_pk == parsed.thread_pk


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("source", ["cache", "database"])
async def test_the_worker_rebuilds_the_webs_request_turn_after_turn(
    celery_executor: Celery, store: str, source: str
) -> None:
    previous: str | None = None
    previous_ids: set[str] = set()
    for turn, messages in enumerate(_conversation(6)):
        request = _v1("multi", messages)
        queued = await _queue_turn(celery_executor, request)
        history = queued.placement["history"]
        carried = orjson.loads(queued.placement["request_part"])["messages"]
        assert history["base"] == previous
        # Only the instructions (a fresh id each turn) and what came since the previous turn
        # travel; the rest is the previous turn's.
        ids = [m["id"] for m in messages]
        assert [m["id"] for m in carried] == [i for i in ids if i not in previous_ids]
        assert carried[0]["id"] == f"sys-{turn}"
        if source == "database":
            _another_worker_ran(queued.placement)

        rebuilt = await request_rebuilt(run_id=queued.run_id, placement=queued.placement)

        _assert_same(rebuilt, request)
        previous = queued.run_id
        previous_ids = set(ids)


@pytest.mark.django_db(transaction=True)
async def test_kinds_jsonb_would_change_are_rebuilt_as_the_client_sent_them(
    celery_executor: Celery,
) -> None:
    histories = _conversation(5)
    for messages in histories:
        request = _v1("kinds", messages)
        queued = await _queue_turn(celery_executor, request)
    _another_worker_ran(queued.placement)

    rebuilt = await request_rebuilt(run_id=queued.run_id, placement=queued.placement)

    _assert_same(rebuilt, request)
    kinds = {message.kind for message in rebuilt.messages}
    assert kinds == {"text", "action_execution", "result", "image", "agent_state"}
    call = next(m for m in rebuilt.messages if m.kind == "action_execution")
    assert list(call.arguments or {}) == ["units", "city", "days", "ratio", "exact"]
    assert type((call.arguments or {})["ratio"]) is float


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("source", ["cache", "database"])
async def test_an_edited_or_regenerated_history_travels_where_it_differs(
    celery_executor: Celery, store: str, source: str
) -> None:
    first = [text_input("u1", "first question")]
    second = [*first, _assistant("a1", 1), text_input("u2", "second question")]
    # The client edited its first message (keeping its id) and regenerated the last reply.
    edited = [
        text_input("u1", "first question, edited"),
        _assistant("a1", 1),
        text_input("u2", "second question"),
        _assistant("a2-regenerated", 3, "Another answer."),
        text_input("u3", "third question"),
    ]
    # Then forked from before the edit: an earlier branch again, continued.
    forked = [*second, _assistant("a2", 2), text_input("u3-fork", "a new branch")]
    queued = [await _queue_turn(celery_executor, _v1("edits", m)) for m in (first, second)]
    # What differs from the previous request travels (the first message's other body too).
    for messages, changed in (
        (edited, {"u1", "a2-regenerated", "u3"}),
        (forked, {"u1", "a2", "u3-fork"}),
    ):
        request = _v1("edits", messages)
        turn = await _queue_turn(celery_executor, request)
        carried = orjson.loads(turn.placement["request_part"])["messages"]
        assert {m["id"] for m in carried} == changed
        assert turn.placement["history"]["base"] == queued[-1].run_id
        if source == "database":
            _another_worker_ran(turn.placement)

        rebuilt = await request_rebuilt(run_id=turn.run_id, placement=turn.placement)

        _assert_same(rebuilt, request)
        queued.append(turn)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("source", ["cache", "database"])
async def test_an_agui_thread_with_tool_calls_is_rebuilt_exactly(
    celery_executor: Celery, store: str, source: str
) -> None:
    history: list[dict[str, Any]] = []
    previous: str | None = None
    for turn in range(4):
        if turn:
            history.append(
                {
                    "id": f"a{turn}",
                    "role": "assistant",
                    "content": ASSISTANT_REPLY,
                    "toolCalls": [
                        {
                            "id": f"call{turn}",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q":"x","n":2}'},
                        }
                    ],
                }
            )
            history.append(
                {"id": f"t{turn}", "role": "tool", "toolCallId": f"call{turn}", "content": "ok"}
            )
        history.append(
            {
                "id": f"u{turn}",
                "role": "user",
                "content": [
                    {"type": "text", "text": f"look at this {turn}"},
                    {
                        "type": "image",
                        "source": {
                            "type": "data",
                            "mimeType": "image/png",
                            "value": "iVBORw0KGgo=",
                        },
                    },
                ],
            }
        )
        body = {
            "threadId": "agui-thread",
            "runId": f"agui-run-{turn}",
            "messages": [dict(m) for m in history],
            "tools": [],
            "context": [],
            "state": {"count": turn},
            "forwardedProps": {},
        }
        run_input = run_input_parse(body, agui_history(body, None))
        request = turn_request_from_run_input(run_input, agent_name="default")
        queued = await _queue_turn(celery_executor, request, protocol="agui")
        assert queued.placement["history"]["base"] == previous
        if source == "database":
            _another_worker_ran(queued.placement)

        rebuilt = await request_rebuilt(run_id=queued.run_id, placement=queued.placement)

        _assert_same(rebuilt, request)
        assert any(m.kind == "image" for m in rebuilt.messages)
        previous = queued.run_id


def _exchanges(count: int, *, instructions_id: str) -> list[dict[str, Any]]:
    """A v1 history of ``count`` messages: the instructions, ``count - 2`` earlier messages,
    alternately the user's and the assistant's, and the new question."""
    messages = [text_input(instructions_id, INSTRUCTIONS, role="system")]
    for n in range(count - 2):
        if n % 2 == 0:
            messages.append(text_input(f"u{n}", f"A question of ordinary length, number {n}."))
        else:
            messages.append(_assistant(f"a{n}", n))
    messages.append(text_input(f"u{count}", "And the newest question?"))
    return messages


@pytest.mark.django_db(transaction=True)
async def test_a_tasks_message_does_not_grow_with_the_history(
    celery_executor: Celery, store: str
) -> None:
    sizes: dict[int, int] = {}
    whole: dict[int, int] = {}
    for count in (2, 40):
        thread_id = f"sizes-{count}"
        # The thread's earlier turn (its history without the newest question) came first.
        earlier = _exchanges(count, instructions_id="sys-earlier")[:-1]
        if len(earlier) > 1:
            await _queue_turn(celery_executor, _v1(thread_id, earlier))
        request = _v1(thread_id, _exchanges(count, instructions_id=f"sys-{count}"))
        queued = await _queue_turn(celery_executor, request)
        sizes[count] = len(queued.body)
        carried = orjson.loads(queued.placement["request_part"])["messages"]
        # The new messages alone: the instructions (a fresh id each turn) and the question.
        assert [m["id"] for m in carried] == [f"sys-{count}", f"u{count}"]
        # What the task of an earlier version carried, queued the same way: the whole request.
        legacy = placement_of(_prepared_like(queued.placement), request)
        await enqueue_run(run_id=queued.run_id, placement=legacy)
        whole[count] = len(_received(celery_executor).body)

    print(f"task message bytes: {sizes} (whole request: {whole})")
    assert sizes[40] - sizes[2] < 200  # a longer base id and span list, not the messages
    assert whole[40] > 5 * sizes[40]


def _prepared_like(placement: dict[str, Any]) -> PreparedTurn:
    return PreparedTurn(
        run_id="",
        thread_id=placement["thread_id"],
        thread_pk=placement["thread_pk"],
        next_position=placement["next_position"],
    )


@pytest.mark.django_db(transaction=True)
async def test_the_cache_serves_only_the_base_it_names(
    celery_executor: Celery, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    real = task_history.run_task_histories

    def counted(*, thread_pk: int) -> dict[str, dict[str, Any]]:
        reads.append(thread_pk)
        return real(thread_pk=thread_pk)

    monkeypatch.setattr(task_history, "run_task_histories", counted)
    requests = [_v1("stale", messages) for messages in _conversation(4)]
    turns = [await _queue_turn(celery_executor, request) for request in requests]
    first = await request_rebuilt(run_id=turns[0].run_id, placement=turns[0].placement)
    # Turns 1 and 2 went to another worker: this one's cache holds turn 0's history.
    assert reads == []

    rebuilt = await request_rebuilt(run_id=turns[3].run_id, placement=turns[3].placement)

    assert reads == [turns[3].placement["thread_pk"]]  # not the cached run: read
    _assert_same(rebuilt, requests[3])
    assert rebuilt.messages[1] is first.messages[1]  # back to the cached run, then shared

    # A known history of another run is never taken for the base, whatever it holds.
    known = HISTORIES.of_thread(turns[3].placement["thread_pk"])
    assert known is not None and known.run_id == turns[3].run_id
    known.run_id = "not-the-base"
    again = await request_rebuilt(run_id=turns[3].run_id, placement=turns[3].placement)
    assert len(reads) == 2
    _assert_same(again, rebuilt)
    # The next turn names the cached run (turn 3): no read.
    request = _v1("stale", _conversation(5)[4])
    turn = await _queue_turn(celery_executor, request)
    assert turn.placement["history"]["base"] == turns[3].run_id
    _assert_same(await request_rebuilt(run_id=turn.run_id, placement=turn.placement), request)
    assert len(reads) == 2


@pytest.mark.django_db(transaction=True)
async def test_a_history_that_cannot_be_rebuilt_is_never_run_shortened(
    celery_executor: Celery,
) -> None:
    turns = [await _queue_turn(celery_executor, _v1("lost", m)) for m in _conversation(2)]
    await Run.objects.filter(pk=turns[0].run_id).aupdate(request_payload=None)

    with pytest.raises(HistoryUnavailable):
        await request_rebuilt(run_id=turns[1].run_id, placement=turns[1].placement)

    broken = {**turns[1].placement, "history": {**turns[1].placement["history"], "count": 99}}
    _another_worker_ran(turns[1].placement)
    await request_rebuilt(run_id=turns[0].run_id, placement=turns[0].placement)
    with pytest.raises(HistoryUnavailable):
        await request_rebuilt(run_id=turns[1].run_id, placement=broken)


@pytest.mark.django_db(transaction=True)
async def test_a_referring_task_executes_with_the_whole_history(
    celery_executor: Celery, fake_upstream: Any
) -> None:
    first = [text_input("u1", "FAKE: {}")]
    queued = await _queue_turn(celery_executor, _v1("executes", first))
    second = [*first, _assistant("a1", 1, "FAKE: {}"), text_input("u2", "FAKE: {}")]
    run = await _queue_turn(celery_executor, _v1("executes", second))
    await Run.objects.filter(pk=run.run_id).aupdate(status=RunStatus.PENDING)
    assert run.placement["history"]["base"] == queued.run_id
    _another_worker_ran(run.placement)  # the base comes from the database

    assert await run_execute_stored(run_id=run.run_id, placement=run.placement) == (
        RunStatus.SUCCEEDED
    )
    sent = fake_upstream.requests()[-1]["messages"]
    assert [m["role"] for m in sent if m["role"] != "system"] == ["user", "assistant", "user"]


@pytest.mark.django_db(transaction=True)
async def test_a_thread_made_again_under_the_same_id_carries_everything(
    celery_executor: Celery,
) -> None:
    messages = [text_input("u1", "hello")]
    queued = await _queue_turn(celery_executor, _v1("again", messages))
    await Run.objects.filter(pk=queued.run_id).adelete()
    await Thread.objects.filter(thread_id="again").adelete()

    request = _v1("again", [*messages, _assistant("a1", 1), text_input("u2", "again")])
    turn = await _queue_turn(celery_executor, request)

    assert turn.placement["history"] == {"base": None, "count": 3, "spans": []}
    _another_worker_ran(turn.placement)
    _assert_same(await request_rebuilt(run_id=turn.run_id, placement=turn.placement), request)
