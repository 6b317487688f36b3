"""Conformance: the in-process executor and the Celery worker leave the same record of a turn.

The same scripted turns (a text reply, parallel frontend tool calls, a failing server tool, a
stream cut off by the model server) go through a daphne running turns in-process and through a
daphne handing them to a real Celery worker. Both must leave identical persisted messages and
identical event logs, up to generated ids (and the thread id) and to how deltas were batched:
coalescing depends on timing, so consecutive deltas of one message are merged before comparing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Message, Run
from tests.e2e.celery.support import fake, log_entries
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    SAY_HELLO_ACTION,
    finished_run,
    generate_command,
    generate_data,
    server_env,
    text_input,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

SAY_HELLO_CALLS = [
    {"name": "sayHello", "arguments": {"name": "Ada"}},
    {"name": "sayHello", "arguments": {"name": "Grace"}},
]
FAILING_TOOL = {"tool_calls": [{"name": "always_fails", "arguments": {"reason": "kaboom"}}]}
SCRIPTED_TURNS: dict[str, dict[str, Any]] = {
    "text": {"text": "Hello there, how can I help you today?", "delay_ms": 5},
    "parallel-tools": {"tool_calls": SAY_HELLO_CALLS},
    "failing-tool": {"steps": [FAILING_TOOL, {"text": "That did not work."}]},
    "cut-off": {"fail_after_tokens": 6, "delay_ms": 5},
}
# Ids the runtime or the fake upstream generate: differ from one execution to the next.
GENERATED_ID = re.compile(
    r"ck-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|call_fake_\d+_\d+"
)
MESSAGE_FIELDS = (
    "message_id",
    "kind",
    "role",
    "content",
    "action_name",
    "arguments",
    "parent_message_id",
    "action_execution_id",
    "result",
    "status",
    "status_reason",
    "superseded",
)
DELTA_KEYS = {"text_delta": "message_id", "action_args": "action_execution_id"}


class IdNormaliser:
    """Replaces each generated id by a placeholder numbered in order of first appearance."""

    def __init__(self, fixed: dict[str, str]) -> None:
        self._seen: dict[str, str] = dict(fixed)

    def _placeholder(self, match: re.Match[str]) -> str:
        return self._seen.setdefault(match.group(0), f"<id{len(self._seen)}>")

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):
            if value in self._seen:
                return self._seen[value]
            return GENERATED_ID.sub(self._placeholder, value)
        if isinstance(value, dict):
            return {key: self(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self(item) for item in value]
        return value


def merged_log(run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The run's log as (type, payload), consecutive deltas of one message merged into one."""
    merged: list[tuple[str, dict[str, Any]]] = []
    for _seq, kind, payload in log_entries(run_id):
        key = DELTA_KEYS.get(kind)
        if merged and key is not None:
            last_kind, last = merged[-1]
            if last_kind == kind and last[key] == payload[key]:
                merged[-1] = (kind, {**last, "delta": last["delta"] + payload["delta"]})
                continue
        merged.append((kind, dict(payload)))
    return merged


def turn_record(thread_id: str, run_id: str) -> dict[str, Any]:
    """What a turn left in the database, with generated ids normalised."""
    run = finished_run(run_id)
    normalise = IdNormaliser({thread_id: "<thread>", run_id: "<run>"})
    messages = [
        dict(zip(MESSAGE_FIELDS, row, strict=True))
        for row in Message.objects.filter(thread__thread_id=thread_id)
        .order_by("position")
        .values_list(*MESSAGE_FIELDS)
    ]
    seqs = [seq for seq, _, _ in log_entries(run_id)]
    return normalise(
        {
            "run": {
                "status": run.status,
                "error_code": run.error_code,
                "error_details": run.error_details,
                "input_tokens": run.input_tokens,
                "output_tokens": run.output_tokens,
                "consecutive_seqs": seqs == list(range(1, len(seqs) + 1)),
            },
            "messages": messages,
            "log": merged_log(run_id),
        }
    )


def run_scripted_turns(server_url: str, prefix: str) -> dict[str, dict[str, Any]]:
    commands = [
        generate_command(
            server_url,
            generate_data(
                thread_id=f"{prefix}-{name}",
                messages=[text_input("u1", fake(directive))],
                actions=[SAY_HELLO_ACTION],
            ),
        )
        for name, directive in SCRIPTED_TURNS.items()
    ]
    results = run_js(JS_CLIENT_VERSIONS[0], {"op": "sequence", "commands": commands})["results"]
    records = {}
    for name, result in zip(SCRIPTED_TURNS, results, strict=True):
        thread_id = f"{prefix}-{name}"
        run_id = result["final"]["runId"]
        records[name] = turn_record(thread_id, run_id)
    return records


def test_inline_and_celery_executors_leave_identical_records(
    live_server_factory: Any,
    celery_stack: Any,
    redis_url: str,
    fake_upstream: FakeUpstream,
) -> None:
    inline_server = live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_EXECUTOR="inline")
    )
    celery_server, worker = celery_stack(redis_url)

    inline = run_scripted_turns(inline_server.url, "inline")
    on_worker = run_scripted_turns(celery_server.url, "celery")

    for name in SCRIPTED_TURNS:
        assert on_worker[name] == inline[name], name
    # The comparison compared something: each turn ended the way its script says.
    outcomes = {name: (r["run"]["status"], r["run"]["error_code"]) for name, r in inline.items()}
    assert outcomes["text"] == ("succeeded", "")
    assert outcomes["parallel-tools"] == ("succeeded", "")
    assert outcomes["failing-tool"] == ("succeeded", "")
    assert outcomes["cut-off"][0] == "failed"
    assert all(record["run"]["consecutive_seqs"] for record in inline.values())
    parallel = inline["parallel-tools"]["messages"]
    assert [(m["kind"], m["arguments"]) for m in parallel[1:]] == [
        ("action_execution", {"name": "Ada"}),
        ("action_execution", {"name": "Grace"}),
    ]
    failing = inline["failing-tool"]["messages"]
    assert [m["kind"] for m in failing] == ["text", "action_execution", "result", "text"]
    assert "kaboom" in failing[2]["result"]
    cut_off = inline["cut-off"]["messages"][1]
    assert (cut_off["status"], cut_off["content"]) == ("failed", "t0 t1 t2 t3 t4 t5")
    # Every scripted turn ran on the worker, not in the second web process.
    assert len(worker.executed_runs()) == len(SCRIPTED_TURNS)
    assert Run.objects.filter(thread__thread_id__startswith="celery-").count() == len(
        SCRIPTED_TURNS
    )
