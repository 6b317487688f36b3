"""``generateCopilotResponse`` end to end: what reaches the model, request types, request hooks.

The real CopilotKit client (both pinned versions) sends forwarded parameters and the other
request types (CopilotTask, suggestions, CopilotTextarea); the fake upstream records what the
model was asked. Request hooks from tests/support/hooks.py record what they were given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Run, RunStatus
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    SAY_HELLO_ACTION,
    assert_no_traceback,
    finished_run,
    generate_command,
    generate_data,
    graphql_error_codes,
    joined_content,
    server_env,
    text_input,
    thread_rows,
    wait_for,
)
from tests.support.hooks import (
    FAIL_AFTER_HOOK_PROPERTY,
    FAIL_BEFORE_HOOK_PROPERTY,
    HOOK_LOG_ENV,
    read_hook_log,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

versions = pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)

PAGE_URL = "http://127.0.0.1/app/page?tab=chat"


FORWARDED_CASES = [
    pytest.param(
        {"toolChoice": "function", "toolChoiceFunctionName": "sayHello"},
        {"type": "function", "function": {"name": "sayHello"}},
        id="tool-choice-function",
    ),
    pytest.param({"toolChoice": "required"}, "required", id="tool-choice-required"),
]


@versions
@pytest.mark.parametrize(("tool_choice", "expected_tool_choice"), FORWARDED_CASES)
def test_forwarded_parameters_reach_the_model_request(
    server: ServedProcess,
    fake_upstream: FakeUpstream,
    version: str,
    tool_choice: dict[str, str],
    expected_tool_choice: Any,
) -> None:
    fake_upstream.script({"text": "Parameters received."})
    forwarded = {
        "model": "gpt-e2e-model",
        "maxTokens": 42,
        "stop": ["STOP", "END"],
        "temperature": 0.25,
        **tool_choice,
    }
    data = generate_data(
        thread_id=f"thread-forwarded-{version}-{tool_choice['toolChoice']}",
        messages=[text_input("u1", "Use my parameters")],
        actions=[SAY_HELLO_ACTION],
        forwarded=forwarded,
    )

    result = run_js(version, generate_command(server.url, data))

    assert result["errors"] == []
    assert result["final"]["status"]["code"] == "Success"
    (model_request,) = fake_upstream.requests()
    assert model_request["model"] == "gpt-e2e-model"
    assert model_request["max_tokens"] == 42
    assert model_request["stop"] == ["STOP", "END"]
    assert model_request["temperature"] == 0.25
    assert model_request["tool_choice"] == expected_tool_choice
    assert model_request["stream"] is True
    assert model_request["stream_options"]["include_usage"] is True
    assert "sayHello" in {tool["function"]["name"] for tool in model_request["tools"]}
    run = finished_run(result["final"]["runId"])
    assert run.model == "gpt-e2e-model"
    assert run.output_tokens == 2


@versions
def test_request_types_each_get_an_answer_and_are_recorded(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    # CopilotTask: a system message with the instructions, the task's actions, toolChoice
    # "required" and no threadId (a one-off task); the model calls an action.
    fake_upstream.script({"tool_calls": [{"name": "sayHello", "arguments": {"name": "Ada"}}]})
    task = generate_data(
        thread_id=None,
        messages=[text_input("sys-1", "Do the task.", role="system")],
        actions=[SAY_HELLO_ACTION],
        request_type="Task",
        forwarded={"toolChoice": "required"},
    )
    task_result = run_js(version, generate_command(server.url, task))
    assert task_result["errors"] == []
    (call,) = task_result["final"]["messages"]
    assert call["__typename"] == "ActionExecutionMessageOutput"
    assert call["name"] == "sayHello"
    assert fake_upstream.requests()[-1]["tool_choice"] == "required"
    task_run = finished_run(task_result["final"]["runId"])
    assert (task_run.request_type, task_run.status) == ("Task", RunStatus.SUCCEEDED)
    assert task_run.thread.thread_id == task_result["final"]["threadId"]

    for request_type, reply in (
        ("Suggestion", "Try asking about the weather."),
        ("TextareaCompletion", "and then some."),
        ("TextareaPopover", "A rewritten paragraph."),
    ):
        fake_upstream.script({"text": reply})
        data = generate_data(
            thread_id=f"thread-{request_type}-{version}",
            messages=[text_input(f"u-{request_type}", f"Help with {request_type}")],
            request_type=request_type,
        )
        result = run_js(version, generate_command(server.url, data))

        assert result["errors"] == [], request_type
        assert result["final"]["status"]["code"] == "Success", request_type
        assert joined_content(result["final"]["messages"][0]) == reply
        run = finished_run(result["final"]["runId"])
        assert (run.request_type, run.status) == (request_type, RunStatus.SUCCEEDED)


@versions
def test_request_hooks_see_the_turn_and_a_failing_after_hook_is_harmless(
    live_server_factory: Any, fake_upstream: FakeUpstream, tmp_path: Path, version: str
) -> None:
    hook_log = tmp_path / "hooks.jsonl"
    server = live_server_factory(
        env=server_env(
            fake_upstream.base_url,
            COPILOT_RUNTIME_ON_BEFORE_REQUEST="tests.support.hooks.record_before_request",
            COPILOT_RUNTIME_ON_AFTER_REQUEST="tests.support.hooks.record_after_request",
            **{HOOK_LOG_ENV: str(hook_log)},
        )
    )
    fake_upstream.script({"text": "Hooked reply."}, {"text": "Still fine."})
    thread_id = f"thread-hooks-{version}"
    data = generate_data(
        thread_id=thread_id, messages=[text_input("u1", "Hello hooks")], page_url=PAGE_URL
    )

    result = run_js(version, generate_command(server.url, data, properties={"tenant": "acme"}))

    assert result["errors"] == []
    run_id = result["final"]["runId"]
    (answer,) = result["final"]["messages"]
    before, after = wait_for(
        lambda: (entries := read_hook_log(hook_log)) and len(entries) >= 2 and entries,
        timeout=10,
        what="both hooks to record the first turn",
    )
    assert before["hook"] == "before"
    assert after["hook"] == "after"
    for entry in (before, after):
        assert entry["thread_id"] == thread_id
        assert entry["run_id"] == run_id
        assert entry["properties"] == {"tenant": "acme"}
        assert entry["url"] == PAGE_URL
        assert [(m["id"], m["role"], m["content"]) for m in entry["input_messages"]] == [
            ("u1", "user", "Hello hooks")
        ]
    assert before["output_messages"] == []
    (output,) = after["output_messages"]
    assert output["message_id"] == answer["id"]
    assert (output["role"], output["content"]) == ("assistant", "Hooked reply.")

    second = generate_data(
        thread_id=f"{thread_id}-failing",
        messages=[text_input("u1", "Break the after hook")],
        page_url=PAGE_URL,
    )
    failing = run_js(
        version,
        generate_command(server.url, second, properties={FAIL_AFTER_HOOK_PROPERTY: True}),
    )

    assert failing["errors"] == []
    assert failing["final"]["status"] == {"code": "Success", "__typename": "SuccessResponseStatus"}
    assert joined_content(failing["final"]["messages"][0]) == "Still fine."
    entries = wait_for(
        lambda: (found := read_hook_log(hook_log)) and len(found) >= 4 and found,
        timeout=10,
        what="both hooks to record the second turn",
    )
    assert [entry["hook"] for entry in entries] == ["before", "after", "before", "after"]
    assert entries[3]["run_id"] == failing["final"]["runId"]
    assert finished_run(failing["final"]["runId"]).status == RunStatus.SUCCEEDED
    wait_for(
        lambda: "on_after_request failed" in server.stderr_text(),
        timeout=5,
        what="the failing hook to be logged",
    )


@versions
def test_a_failing_before_hook_refuses_the_request_and_frees_the_thread(
    live_server_factory: Any, fake_upstream: FakeUpstream, tmp_path: Path, version: str
) -> None:
    hook_log = tmp_path / "hooks.jsonl"
    server = live_server_factory(
        env=server_env(
            fake_upstream.base_url,
            COPILOT_RUNTIME_ON_BEFORE_REQUEST="tests.support.hooks.record_before_request",
            **{HOOK_LOG_ENV: str(hook_log)},
        )
    )
    thread_id = f"thread-before-hook-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Let me in")])

    refused = run_js(
        version, generate_command(server.url, data, properties={FAIL_BEFORE_HOOK_PROPERTY: True})
    )

    assert [exchange["status"] for exchange in refused["http"]] == [200]
    assert "UNKNOWN" in graphql_error_codes(refused), refused["errors"]
    assert refused["final"] is None
    assert "on purpose" not in json.dumps(refused)  # the hook's own message stays inside
    assert_no_traceback(json.dumps(refused))
    assert fake_upstream.requests() == []
    (run,) = Run.objects.filter(thread__thread_id=thread_id)
    run = finished_run(run.id)
    assert run.status == RunStatus.FAILED
    assert run.error_code == "BEFORE_REQUEST_HOOK_FAILED"
    assert [entry["hook"] for entry in read_hook_log(hook_log)] == ["before"]

    # The refused run does not leave the thread busy.
    fake_upstream.script({"text": "Welcome."})
    admitted = run_js(version, generate_command(server.url, data, properties={}))

    assert admitted["errors"] == []
    assert joined_content(admitted["final"]["messages"][0]) == "Welcome."
    assert finished_run(admitted["final"]["runId"]).status == RunStatus.SUCCEEDED
    assert [row.message_id for row in thread_rows(thread_id)] == [
        "u1",
        admitted["final"]["messages"][0]["id"],
    ]
