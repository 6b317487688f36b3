"""Turns executed by a real Celery worker and streamed to the real CopilotKit client by daphne.

The web process records the request and relays; the worker runs the turn. A task delivered
twice (Celery's late ack redelivers after a lost worker) never runs the turn a second time. A
task carrying several runs (queued together by a busy web process) executes each.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from asgiref.sync import async_to_sync
from celery import Celery
from django.contrib.auth.models import AnonymousUser

from conversations.models import Run, RunStatus
from copilot_runtime.events.request import turn_request_to_payload
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.runs.executor import EXECUTE_RUN_TASK, EXECUTE_RUNS_TASK, placement_of
from copilot_runtime.runs.start import turn_prepare
from copilot_runtime.tasks import execute_run
from tests.e2e.celery.support import fake, in_background, log_entries
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    deterministic_tokens,
    finished_run,
    generate_command,
    generate_data,
    joined_content,
    run_events,
    text_input,
    thread_rows,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

CLIENT = JS_CLIENT_VERSIONS[0]  # 1.10.6, the last release built on the GraphQL protocol
END_BOUND_MS = 2000


def test_a_worker_runs_the_turn_and_daphne_streams_it_to_the_real_client(
    celery_stack: Any, redis_url: str, fake_upstream: FakeUpstream
) -> None:
    server, worker = celery_stack(redis_url)
    thread_id = "celery-text-and-action"
    add = {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 2, "b": 3}}]}
    directive = {"steps": [add, {"text": "The sum is 5."}]}
    command = {
        "op": "sequence",
        "url": server.url + "/api/copilotkit",
        "commands": [
            generate_command(
                server.url,
                generate_data(
                    thread_id=thread_id,
                    messages=[text_input("u1", fake({"tokens": 12, "delay_ms": 30}))],
                ),
            ),
            {
                "op": "generate",
                "followUp": {"userText": fake(directive)},
                "data": {"threadId": thread_id},
            },
        ],
    }

    text_turn, action_turn = run_js(CLIENT, command)["results"]

    assert text_turn["errors"] == []
    assert text_turn["final"]["status"]["code"] == "Success"
    (reply,) = text_turn["final"]["messages"]
    assert joined_content(reply) == deterministic_tokens(12)
    # Streamed, not delivered in one piece at the end.
    assert len(reply["content"]) > 1

    assert action_turn["errors"] == []
    assert action_turn["final"]["status"]["code"] == "Success"
    call, result, text = action_turn["final"]["messages"]
    assert call["name"] == "serverAdd"
    assert json.loads(joined_content(call)) == {"a": 2, "b": 3}
    assert result["actionExecutionId"] == call["id"]
    assert json.loads(result["result"]) == {"sum": 5}
    assert joined_content(text) == "The sum is 5."

    for turn in (text_turn, action_turn):
        # The end follows the last message at once (a worker must not linger after a turn).
        last_message_to_end = turn["snapshotMs"][-1] - turn["snapshotMs"][-2]
        assert last_message_to_end < END_BOUND_MS, turn["snapshotMs"]

    first_run = finished_run(text_turn["final"]["runId"])
    second_run = finished_run(action_turn["final"]["runId"])
    assert (first_run.status, second_run.status) == (RunStatus.SUCCEEDED, RunStatus.SUCCEEDED)
    assert first_run.attempts == second_run.attempts == 1
    # Both turns were executed by the worker: Celery logged each task's final status.
    wait_for(lambda: len(worker.executed_runs()) == 2, timeout=5, what="the worker's task log")
    assert worker.executed_runs() == ["succeeded", "succeeded"]
    assert worker.tasks_received() == 2

    rows = thread_rows(thread_id)
    assert [(row.kind, row.role) for row in rows] == [
        ("text", "user"),
        ("text", "assistant"),
        ("text", "user"),
        ("action_execution", "assistant"),
        ("result", "tool"),
        ("text", "assistant"),
    ]
    assert rows[1].content == deterministic_tokens(12)
    assert rows[3].arguments == {"a": 2, "b": 3}
    assert json.loads(rows[4].result) == {"sum": 5}
    assert rows[5].content == "The sum is 5."
    for run in (first_run, second_run):
        log = run_events(run.id)
        assert [event.seq for event in log] == list(range(1, len(log) + 1))
        assert log[-1].type == "run_finished"
        assert log[-1].payload["status"] == "succeeded"


def test_a_redelivered_task_does_not_run_the_turn_twice(
    celery_stack: Any, redis_url: str, fake_upstream: FakeUpstream
) -> None:
    server, worker = celery_stack(redis_url)
    thread_id = "celery-redelivered"
    data = generate_data(
        thread_id=thread_id,
        messages=[text_input("u1", fake({"tokens": 30, "delay_ms": 20}))],
    )
    command = generate_command(server.url, data)

    with in_background(lambda: run_js(CLIENT, command)) as turn:
        run = wait_for(
            lambda: Run.objects.filter(thread__thread_id=thread_id, status="running").first(),
            timeout=15,
            what="the worker to start the run",
        )
        # A second delivery while the first is executing: it finds the run started.
        assert execute_run.apply(args=[run.pk]).get() == ""
        result = turn.result(timeout=30)

    assert result["errors"] == []
    assert joined_content(result["final"]["messages"][0]) == deterministic_tokens(30)
    finished = finished_run(run.pk)
    assert finished.status == RunStatus.SUCCEEDED
    before = log_entries(run.pk)
    rows_before = [(row.message_id, row.content) for row in thread_rows(thread_id)]

    # A delivery after the run ended: nothing happens either.
    assert execute_run.apply(args=[run.pk]).get() == ""

    assert log_entries(run.pk) == before
    assert [(row.message_id, row.content) for row in thread_rows(thread_id)] == rows_before
    again = Run.objects.get(pk=run.pk)
    assert (again.status, again.attempts, again.finished_at) == (
        RunStatus.SUCCEEDED,
        1,
        finished.finished_at,
    )
    assert [event.seq for event in run_events(run.pk)] == list(range(1, len(before) + 1))
    # The model was asked once.
    assert fake_upstream.stats()["requests"] == 1
    assert worker.tasks_received() == 1


CLAIMED_WHILE_ASKING = "this delivery stores nothing"  # the claim failed after the model was asked
CLAIMED_BEFORE_ASKING = "not starting it twice"  # the run was found started before asking


def test_a_first_delivery_claims_while_asking_and_a_put_back_task_claims_first(
    celery_stack: Any,
    celery_worker_factory: Any,
    celery_env: Any,
    redis_url: str,
    fake_upstream: FakeUpstream,
) -> None:
    server, worker = celery_stack(redis_url)
    thread_id = "celery-deliveries"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", fake({"tokens": 5}))])
    result = run_js(CLIENT, generate_command(server.url, data))
    assert result["errors"] == []
    run = finished_run(result["final"]["runId"])
    wait_for(lambda: worker.executed_runs() == ["succeeded"], timeout=5, what="the first run")
    rows = [(row.message_id, row.content) for row in thread_rows(thread_id)]
    stored = (log_entries(run.pk), rows)
    placement = {
        "thread_id": thread_id,
        "thread_pk": run.thread_id,
        "next_position": None,
        "request": turn_request_to_payload(parse_generate_input(data, {})),
    }
    app = Celery("deliveries", broker=redis_url, set_as_current=False)

    # The same task pushed again (a push that timed out after reaching Redis is sent again):
    # the broker does not flag it, and the worker claims the run while asking the model.
    app.send_task(EXECUTE_RUN_TASK, args=[run.pk, placement])
    wait_for(lambda: len(worker.executed_runs()) == 2, timeout=10, what="the duplicate")
    assert worker.executed_runs()[1] == ""
    assert CLAIMED_WHILE_ASKING in worker.log_text()

    # A task a worker took and never acknowledged: kombu puts it back on the queue, flagged as
    # delivered before, and the next worker learns that its run started before asking.
    worker.stop()
    # Counted once the first worker is gone: the duplicate's request to the model, cancelled
    # when its claim failed, may reach the upstream after the task has returned.
    asked = fake_upstream.stats()["requests"]
    assert asked in (1, 2)  # the duplicate may have asked the model before its claim failed
    app.send_task(EXECUTE_RUN_TASK, args=[run.pk, placement])
    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue(app.conf.task_default_queue)
        queue.get(timeout=5)
        queue.close()  # unacknowledged
    second = celery_worker_factory(env=celery_env(redis_url), name="w2")
    wait_for(lambda: second.executed_runs() == [""], timeout=10, what="the put-back task")
    assert CLAIMED_BEFORE_ASKING in second.log_text()
    assert CLAIMED_WHILE_ASKING not in second.log_text()
    assert fake_upstream.stats()["requests"] == asked

    rows = [(row.message_id, row.content) for row in thread_rows(thread_id)]
    assert (log_entries(run.pk), rows) == stored
    again = Run.objects.get(pk=run.pk)
    assert (again.status, again.attempts, again.finished_at) == (
        RunStatus.SUCCEEDED,
        1,
        run.finished_at,
    )


def test_a_task_of_several_runs_executes_each_at_once(
    celery_worker_factory: Any, celery_env: Any, redis_url: str, fake_upstream: FakeUpstream
) -> None:
    worker = celery_worker_factory(env=celery_env(redis_url))
    replies = {f"together-{n}": f"reply {n} " + deterministic_tokens(6) for n in range(3)}

    async def prepare_all() -> list[list[Any]]:
        queued = []
        for thread_id, reply in replies.items():
            # 400 ms of streaming each: executed one after another they would take over 1.2 s.
            directive = {"text": reply, "delay_ms": 400 // len(reply.split())}
            data = generate_data(thread_id=thread_id, messages=[text_input("u1", fake(directive))])
            request = parse_generate_input(data, {})
            prepared = await turn_prepare(user=AnonymousUser(), request=request, protocol="graphql")
            queued.append([prepared.run_id, placement_of(prepared, request)])
        return queued

    # Prepared in this process (its executor is inline: nothing is queued), sent as one task.
    queued = async_to_sync(prepare_all)()
    app = Celery("together", broker=redis_url, set_as_current=False)
    app.send_task(EXECUTE_RUNS_TASK, args=[queued])

    wait_for(lambda: len(worker.executed_runs()) == 3, timeout=15, what="the task's three runs")
    assert worker.executed_runs() == ["succeeded"] * 3
    assert worker.tasks_received() == 1
    runs = [finished_run(run_id) for run_id, _ in queued]
    for run, (thread_id, reply) in zip(runs, replies.items(), strict=True):
        assert run.status == RunStatus.SUCCEEDED
        assert [row.content for row in thread_rows(thread_id)][1] == reply
    # At once: each started before any other finished.
    assert max(run.started_at for run in runs) < min(run.finished_at for run in runs)
    assert fake_upstream.stats()["requests"] == 3
