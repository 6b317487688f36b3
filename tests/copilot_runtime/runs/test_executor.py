"""Handing a run to the Celery workers: the message they receive, and what the run keeps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import fields
from typing import Any

import orjson
import pytest
import redis
from celery import Celery
from celery._state import get_current_app
from channels.layers import get_channel_layer
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings
from kombu.utils import json as kombu_json

from conversations.models import Run, RunEvent, RunStatus
from conversations.store import turn_store
from copilot_runtime.adapters import adapter_from_settings
from copilot_runtime.engine.hooks import RequestHookContext
from copilot_runtime.errors import CopilotKitError
from copilot_runtime.events import LATER_FIELDS, READS_LATER_FIELDS, GenerationEnd
from copilot_runtime.events.request import turn_request_to_payload
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.runs import executor
from copilot_runtime.runs import start as service
from copilot_runtime.runs.execute import Claim
from copilot_runtime.runs.executor import (
    EXECUTE_RUN_TASK,
    enqueue_on_worker,
    request_from_task,
    request_in_task,
    run_execute_stored,
    runs_execute_stored,
    watch_remote,
)
from copilot_runtime.runs.relay import run_group
from copilot_runtime.runs.replies import replies_for_loop
from copilot_runtime.runs.start import turn_prepare, turn_start
from tests.support.generate_e2e import generate_data, runtime_settings, text_input
from tests.support.redis_broker import redis_test_url
from tests.support.waiting import eventually

RECEIVE_TIMEOUT = 5.0


@pytest.fixture
def memory_broker_app() -> Iterator[Celery]:
    """A Celery app on kombu's in-memory broker, current while the test runs."""
    previous = get_current_app()
    app = Celery("executor-test", broker="memory://", set_as_current=True)
    try:
        yield app
    finally:
        previous.set_current()
        app.close()


def test_the_task_carries_the_placement_and_names_only_the_run(memory_broker_app: Celery) -> None:
    history = [{"id": f"m{n}", "content": "a private message " * 20} for n in range(50)]
    placement = {"thread_id": "t1", "thread_pk": 7, "next_position": 3, "request": history}

    enqueue_on_worker(run_id="run-1", placement=placement)

    with memory_broker_app.connection_for_read() as connection:
        message = connection.SimpleQueue("celery").get(timeout=RECEIVE_TIMEOUT)
    args, _kwargs, _embed = message.decode()
    assert message.headers["task"] == EXECUTE_RUN_TASK
    assert args == ["run-1", placement]
    # What logs and monitors show of it: the run, not the conversation.
    assert message.headers["argsrepr"] == "['run-1']"


ANSWER = {"name": "LangGraphInterruptEvent", "value": "Book it?", "response": "yes"}


@pytest.fixture
def celery_executor(current_redis_app: Celery, fake_upstream: Any) -> Iterator[Celery]:
    settings = runtime_settings(fake_upstream.base_url, EXECUTOR="celery")
    with override_settings(COPILOT_RUNTIME=settings):
        yield current_redis_app


async def _queued(
    app: Celery, thread_id: str, answers: list[dict[str, Any]], content: str = "FAKE: {}"
) -> tuple[str, Any]:
    """A turn prepared under the celery executor: its run id, and the task's placement."""
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", content)])
    data["metaEvents"] = answers
    request = parse_generate_input(data, {})
    prepared = await turn_prepare(user=AnonymousUser(), request=request, protocol="graphql")
    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue(app.conf.task_default_queue)
        message = queue.get(timeout=RECEIVE_TIMEOUT)
        message.ack()
        queue.close()
    (run_id, placement), _kwargs, _embed = message.decode()
    assert run_id == prepared.run_id
    return run_id, placement


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("answers", "kept"),
    [pytest.param([], None, id="no answers"), pytest.param([ANSWER], [ANSWER], id="an answer")],
)
async def test_the_task_carries_the_request_and_the_run_keeps_only_its_answers(
    celery_executor: Celery, answers: list[dict[str, Any]], kept: list[dict[str, Any]] | None
) -> None:
    run_id, placement = await _queued(celery_executor, "kept-answers", answers)

    # As JSON text: kombu's decoding reads the request as one string, not object by object.
    assert "request" not in placement
    request = orjson.loads(placement["request_part"])
    assert [m["content"] for m in request["messages"]] == ["FAKE: {}"]
    assert request["meta_events"] == answers
    # A thread's first turn refers to no earlier request: everything travels.
    assert placement["history"] == {"base": None, "count": 1, "spans": []}
    run = await Run.objects.aget(pk=run_id)
    assert run.executor == "celery"  # recorded with the run's row
    payload = dict(run.request_payload)
    # What the task carried of the history, for later tasks that refer to this run's.
    history = payload.pop("task_history")
    assert [m["content"] for m in orjson.loads(history["messages"])] == ["FAKE: {}"]
    assert payload == ({} if kept is None else {"meta_events": kept})


@pytest.mark.django_db(transaction=True)
async def test_a_task_of_an_earlier_version_executes_the_request_its_run_stored(
    celery_executor: Celery, fake_upstream: Any
) -> None:
    run_id, placement = await _queued(celery_executor, "stored-request", [])
    # Earlier versions stored the whole request on the run, and queued tasks naming the run only.
    stored = orjson.loads(placement["request_part"])
    await Run.objects.filter(pk=run_id).aupdate(request_payload=stored)

    assert await run_execute_stored(run_id=run_id) == RunStatus.SUCCEEDED
    assert fake_upstream.stats()["requests"] == 1


@pytest.fixture
async def anthropic_celery_executor(
    current_redis_app: Celery, fake_upstream: Any
) -> AsyncIterator[Celery]:
    root = fake_upstream.base_url.removesuffix("/v1")
    adapter = {"kind": "anthropic", "api_key": "test", "base_url": root, "max_retries": 0}
    with override_settings(COPILOT_RUNTIME={"EXECUTOR": "celery", "ADAPTER": adapter}):
        yield current_redis_app
        # One adapter per event loop: its connections close with the test's loop.
        await adapter_from_settings().aclose()


CACHE_WRITE = 'FAKE: {"text": "Noted.", "usage": {"cache_creation_input_tokens": 4}}'


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("reads_later_fields", "logged"),
    [
        pytest.param(True, 4, id="queued by this release"),
        pytest.param(False, None, id="queued by a first-release web process"),
    ],
)
async def test_a_run_logs_the_later_fields_only_for_web_processes_that_read_them(
    anthropic_celery_executor: Celery, reads_later_fields: bool, logged: int | None
) -> None:
    run_id, placement = await _queued(
        anthropic_celery_executor, f"later-{reads_later_fields}", [], CACHE_WRITE
    )
    assert placement[READS_LATER_FIELDS] is True
    if not reads_later_fields:
        del placement[READS_LATER_FIELDS]  # as the first release queued it

    assert await run_execute_stored(run_id=run_id, placement=placement) == RunStatus.SUCCEEDED

    [end] = [
        row.payload async for row in RunEvent.objects.filter(run_id=run_id, type=GenerationEnd.type)
    ]
    assert end.get("cache_write_input_tokens") == logged
    if not reads_later_fields:
        # The first release rebuilt an event strictly from the fields it had.
        later = set(LATER_FIELDS[GenerationEnd.type])
        first_release = {f.name for f in fields(GenerationEnd) if not f.metadata.get("local")}
        assert set(end) <= first_release - later


@pytest.mark.django_db(transaction=True)
async def test_a_task_carrying_the_requests_payload_executes_it(
    celery_executor: Celery, fake_upstream: Any
) -> None:
    run_id, placement = await _queued(celery_executor, "payload-request", [])
    # The form earlier versions carried (and this one, for a request orjson cannot write).
    del placement["history"]
    placement["request"] = orjson.loads(placement.pop("request_part"))

    assert await run_execute_stored(run_id=run_id, placement=placement) == RunStatus.SUCCEEDED
    assert fake_upstream.stats()["requests"] == 1
    assert fake_upstream.requests()[-1]["messages"][-1]["content"] == "FAKE: {}"


def test_a_request_orjson_cannot_write_travels_as_its_payload() -> None:
    request = parse_generate_input(
        generate_data(thread_id="big", messages=[text_input("u1", "hi")]), {}
    )
    request.state = {"count": 2**70}  # put there by a hook: no parsed request holds one

    carried = request_in_task(request)
    # Through the task message, as kombu's JSON writes and reads it.
    received = kombu_json.loads(kombu_json.dumps(carried))

    assert set(carried) == {"request"}
    assert request_from_task(received) == request


def test_the_task_names_the_stored_thread_and_keeps_two_owners_histories_apart() -> None:
    """A worker knows each task's history by the stored thread (its primary key), not the
    client's thread id, which two owners may both use: one owner's task between another's
    two leaves the other's history as it was read."""

    def placement(thread_pk: int, *contents: str) -> dict[str, Any]:
        messages = [text_input(f"u{n}", content) for n, content in enumerate(contents)]
        request = parse_generate_input(generate_data(thread_id="shared", messages=messages), {})
        return {"thread_id": "shared", "thread_pk": thread_pk, **request_in_task(request)}

    alices = request_from_task(placement(1, "alice"))
    bobs = request_from_task(placement(2, "bob"))
    alices_next = request_from_task(placement(1, "alice", "more"))

    assert (alices.thread_pk, bobs.thread_pk, alices_next.thread_pk) == (1, 2, 1)
    assert alices_next.messages[0] is alices.messages[0]  # not read again
    assert [m.content for m in bobs.messages] == ["bob"]


@pytest.mark.django_db(transaction=True)
async def test_runs_queued_together_each_execute_as_if_queued_alone(
    celery_executor: Celery, fake_upstream: Any
) -> None:
    queued = [await _queued(celery_executor, f"together-{n}", []) for n in range(3)]

    statuses = await runs_execute_stored(runs=queued, first_delivery=True)

    assert statuses == [RunStatus.SUCCEEDED] * 3
    for n, (run_id, _placement) in enumerate(queued):
        run = await Run.objects.select_related("thread").aget(pk=run_id)
        assert (run.status, run.attempts, run.thread.thread_id) == (
            RunStatus.SUCCEEDED,
            1,
            f"together-{n}",
        )
        assert [m.role async for m in run.thread.messages.order_by("position")] == [
            "user",
            "assistant",
        ]
    assert fake_upstream.stats()["requests"] == 3


@pytest.mark.django_db(transaction=True)
async def test_a_run_announces_its_batches_to_the_reply_group_its_task_names(
    celery_executor: Celery, fake_upstream: Any
) -> None:
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        run_id, placement = await _queued(celery_executor, "replied", [])
        slot = await replies_for_loop().register(run_id)
        assert slot is not None
        placement["reply_to"] = slot.group

        assert await run_execute_stored(run_id=run_id, placement=placement) == RunStatus.SUCCEEDED

        types: list[str] = []
        while not types or types[-1] != "run_finished":
            message = await asyncio.wait_for(slot.receive(), RECEIVE_TIMEOUT)
            assert message["run_id"] == run_id
            types += [event_type for _seq, event_type, _payload in message["events"]]
        assert types[-1] == "run_finished"
        assert [
            event.type async for event in RunEvent.objects.filter(run_id=run_id).order_by("seq")
        ] == types
        await slot.leave()
        await replies_for_loop().close()


async def test_a_run_that_raises_lets_the_others_of_its_task_end_then_fails_the_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ended: list[str] = []
    started: list[str] = []

    async def execute(*, run_id: str, placement: Any, first_delivery: bool) -> str:
        started.append(run_id)
        if run_id == "broken":
            raise RuntimeError("the run broke")
        await asyncio.sleep(0.05)  # ends after the broken one raised
        ended.append(run_id)
        return RunStatus.SUCCEEDED

    monkeypatch.setattr(executor, "run_execute_stored", execute)

    with pytest.raises(RuntimeError, match="the run broke"):
        await runs_execute_stored(runs=[("fine-1", None), ("broken", None), ("fine-2", None)])

    assert started == ["fine-1", "broken", "fine-2"]
    assert ended == ["fine-1", "fine-2"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("first_delivery", "queued_ago", "in_redis"),
    [
        pytest.param(True, 0.0, True, id="a fresh first delivery"),
        pytest.param(True, 20.0, False, id="a first delivery queued long ago"),
        pytest.param(False, 0.0, False, id="a delivery made again"),
    ],
)
async def test_only_a_fresh_first_delivery_claims_its_run_in_redis(
    celery_executor: Celery,
    monkeypatch: pytest.MonkeyPatch,
    first_delivery: bool,
    queued_ago: float,
    in_redis: bool,
) -> None:
    run_id, placement = await _queued(celery_executor, "claimed-where", [])
    # Queued by the web process a moment ago; PENDING_TIMEOUT_SECONDS is 30 by default.
    assert 0 <= time.time() - placement["queued_at"] < 5
    placement["queued_at"] -= queued_ago
    asked: list[dict[str, Any]] = []

    async def execute(**kwargs: Any) -> str:
        asked.append(kwargs)
        return RunStatus.SUCCEEDED

    monkeypatch.setattr(executor, "run_execute", execute)

    await run_execute_stored(run_id=run_id, placement=placement, first_delivery=first_delivery)

    [kwargs] = asked
    if in_redis:
        assert kwargs["claim"] is Claim.WHILE_ASKING_IN_REDIS
    elif first_delivery:
        assert kwargs["claim"] is Claim.WHILE_ASKING
    else:
        assert kwargs["claim"] is Claim.BEFORE_ASKING


@pytest.mark.django_db(transaction=True)
async def test_a_task_naming_a_run_that_stored_no_request_leaves_it(
    celery_executor: Celery, fake_upstream: Any
) -> None:
    run_id, _placement = await _queued(celery_executor, "no-request", [])

    assert await run_execute_stored(run_id=run_id) == ""
    run = await Run.objects.aget(pk=run_id)
    assert (run.status, run.attempts) == (RunStatus.PENDING, 0)
    assert fake_upstream.stats()["requests"] == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("refused", [False, True], ids=["let through", "refused"])
async def test_a_run_is_queued_only_once_the_before_request_hook_lets_it_through(
    current_redis_app: Celery, fake_upstream: Any, refused: bool
) -> None:
    queue = current_redis_app.conf.task_default_queue
    broker = redis.Redis.from_url(redis_test_url())
    queued_while_hooked: list[int] = []
    fields_seen: list[set[str]] = []

    def hook(context: RequestHookContext) -> None:
        queued_while_hooked.append(broker.llen(queue))
        fields_seen.extend(set(message) for message in context.input_messages)
        if context.properties.get("refuse"):
            raise RuntimeError("refused by the test's hook")

    data = generate_data(thread_id=f"hooked-{refused}", messages=[text_input("u1", "FAKE: {}")])
    request = parse_generate_input(data, {"refuse": refused})
    settings = {"EXECUTOR": "celery", "ON_BEFORE_REQUEST": hook, "OPENAI_API_KEY": "test"}
    try:
        with override_settings(COPILOT_RUNTIME=settings):
            if refused:
                with pytest.raises(CopilotKitError):
                    await turn_start(user=AnonymousUser(), request=request, protocol="graphql")
            else:
                started = await turn_start(
                    user=AnonymousUser(), request=request, protocol="graphql"
                )
                started.detach()
        assert queued_while_hooked == [0]
        # The message's own fields: not what this process noted on it (its task's JSON).
        assert fields_seen == [set(turn_request_to_payload(request)["messages"][0])]
        assert broker.llen(queue) == (0 if refused else 1)
        run = await Run.objects.aget(thread__thread_id=f"hooked-{refused}")
        expected = (RunStatus.FAILED, "BEFORE_REQUEST_HOOK_FAILED")
        assert (run.status, run.error_code) == (expected if refused else (RunStatus.PENDING, ""))
    finally:
        broker.close()


IN_MEMORY_LAYER = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.mark.django_db(transaction=True)
async def test_a_celery_turn_is_followed_from_before_its_run_is_queued(
    celery_executor: Celery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """So the run cannot say anything its follower misses, and the follower need not read the
    log first (one statement per turn). It listens on its loop's reply group, which the task
    names, not on a group of the run's own."""
    when_queued: list[tuple[bool, bool, bool]] = []
    enqueue = service.enqueue_run

    async def recording(*, run_id: str, placement: dict[str, Any]) -> None:
        replies = replies_for_loop()
        when_queued.append(
            (
                replies.listening and replies.following(run_id),
                placement.get("reply_to") == replies.group,
                bool(get_channel_layer().groups.get(run_group(run_id))),
            )
        )
        await enqueue(run_id=run_id, placement=placement)

    monkeypatch.setattr(service, "enqueue_run", recording)
    data = generate_data(thread_id="followed-first", messages=[text_input("u1", "FAKE: {}")])
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        started = await turn_start(
            user=AnonymousUser(), request=parse_generate_input(data, {}), protocol="graphql"
        )
        started.detach()
        await eventually(
            lambda: not replies_for_loop().following(started.run_id),
            what="the detached follower to leave the reply group",
        )
    assert when_queued == [(True, True, False)]


async def test_a_follower_stopped_before_its_first_step_leaves_the_group_it_was_given() -> None:
    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        following = await watch_remote("never-followed", joined_before_queued=True)
        assert following.reply_to == replies_for_loop().group
        assert replies_for_loop().following("never-followed")
        following.detach()  # the request failed before the follower's task ran at all
        await eventually(
            lambda: not replies_for_loop().following("never-followed"),
            what="the detached follower to leave the reply group",
        )


async def test_without_a_reply_group_the_follower_listens_on_the_runs_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def refused(_run_id: str) -> None:
        return None  # the reply group could not be joined

    with override_settings(CHANNEL_LAYERS=IN_MEMORY_LAYER):
        monkeypatch.setattr(replies_for_loop(), "register", refused)
        following = await watch_remote("own-group", joined_before_queued=True)
        assert following.reply_to is None
        assert get_channel_layer().groups.get(run_group("own-group"))
        following.detach()
        await eventually(
            lambda: not get_channel_layer().groups.get(run_group("own-group")),
            what="the detached follower to leave the run's group",
        )


@pytest.fixture(params=["sql", "orm"], ids=["postgresql store", "orm store"])
def store(request: pytest.FixtureRequest) -> str:
    if request.param == "sql":
        request.getfixturevalue("pg_turn_store")
    return str(request.param)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("answers", "kept"),
    [pytest.param([], None, id="no answers"), pytest.param([ANSWER], [ANSWER], id="an answer")],
)
async def test_a_run_executed_in_the_web_process_keeps_its_answers_too(
    fake_upstream: Any, store: str, answers: list[dict[str, Any]], kept: list[Any] | None
) -> None:
    assert type(turn_store()).__name__ == {"sql": "PgTurnStore", "orm": "OrmTurnStore"}[store]
    data = generate_data(thread_id=f"inline-{store}", messages=[text_input("u1", "FAKE: {}")])
    data["metaEvents"] = answers
    turn = parse_generate_input(data, {})
    with override_settings(COPILOT_RUNTIME=runtime_settings(fake_upstream.base_url)):
        prepared = await turn_prepare(user=AnonymousUser(), request=turn, protocol="graphql")

    run = await Run.objects.aget(pk=prepared.run_id)
    assert run.request_payload == (None if kept is None else {"meta_events": kept})


@pytest.mark.django_db(transaction=True)
async def test_an_answer_holding_a_nul_character_is_kept_not_refused(
    fake_upstream: Any, pg_turn_store: None
) -> None:
    answer = {"name": "LangGraphInterruptEvent", "response": "yes\u0000 please"}
    data = generate_data(thread_id="inline-nul", messages=[text_input("u1", "FAKE: {}")])
    data["metaEvents"] = [answer]
    request = parse_generate_input(data, {})
    with override_settings(COPILOT_RUNTIME=runtime_settings(fake_upstream.base_url)):
        prepared = await turn_prepare(user=AnonymousUser(), request=request, protocol="graphql")

    run = await Run.objects.aget(pk=prepared.run_id)
    # PostgreSQL stores no NUL character: kept visible as U+FFFD, as the store keeps a model's.
    kept = {"name": "LangGraphInterruptEvent", "response": "yes\ufffd please"}
    assert run.request_payload == {"meta_events": [kept]}
