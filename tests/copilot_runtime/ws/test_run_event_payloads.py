"""Logged events as ``RunEventPayload``s: messages, meta events and the final status."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings

from conversations.services.runs import LoggedEvent
from copilot_runtime.events import RunError
from copilot_runtime.graphql.types.enums import FailedResponseStatusReason, MessageRole
from copilot_runtime.graphql.types.messages import (
    ActionExecutionMessageOutput,
    AgentStateMessageOutput,
    ResultMessageOutput,
)
from copilot_runtime.graphql.types.meta_events import LangGraphInterruptEvent
from copilot_runtime.graphql.types.run_events import RunEventPayloads
from copilot_runtime.graphql.types.statuses import FailedResponseStatus, SuccessResponseStatus
from tests.copilot_runtime.ws.conftest import (
    COPILOT_STREAM,
    RUNTIME_SETTINGS,
    TRANSPORT,
    OpenSocket,
    fake,
    generate_data,
    payloads_of,
    run_ended,
)


def _payloads(**kwargs: Any) -> RunEventPayloads:
    return RunEventPayloads(run_id="run-1", thread_id="thread-1", **kwargs)


async def test_an_action_start_carries_the_action_message_without_arguments_yet() -> None:
    payload = await _payloads().build(
        LoggedEvent(
            seq=4,
            type="action_start",
            payload={
                "action_execution_id": "call-1",
                "action_name": "add",
                "parent_message_id": "m1",
            },
        )
    )

    assert (payload.sequence, payload.event_type, payload.message_id) == (
        4,
        "action_start",
        "call-1",
    )
    assert isinstance(payload.message, ActionExecutionMessageOutput)
    assert (payload.message.name, payload.message.arguments_source) == ("add", [])
    assert (payload.run_id, payload.thread_id) == ("run-1", "thread-1")


async def test_deltas_carry_their_fragment_and_message() -> None:
    payloads = _payloads()
    args = await payloads.build(
        LoggedEvent(5, "action_args", {"action_execution_id": "call-1", "delta": '{"a": 1'})
    )
    text = await payloads.build(LoggedEvent(6, "text_delta", {"message_id": "m2", "delta": "Hi"}))

    assert (args.message_id, args.delta) == ("call-1", '{"a": 1')
    assert (text.message_id, text.delta) == ("m2", "Hi")
    assert args.message is None and text.message is None


async def test_a_result_and_an_agent_state_carry_their_messages() -> None:
    payloads = _payloads()
    result = await payloads.build(
        LoggedEvent(
            7,
            "action_result",
            {
                "action_execution_id": "call-1",
                "action_name": "add",
                "result": "3",
                "is_error": False,
            },
        )
    )
    state = await payloads.build(
        LoggedEvent(
            8,
            "agent_state",
            {
                "thread_id": "thread-1",
                "agent_name": "default",
                "state": {"n": 1},
                "role": "assistant",
            },
        )
    )

    assert isinstance(result.message, ResultMessageOutput)
    assert result.message_id == result.message.id == "result-call-1"
    assert result.message.result == "3"
    assert isinstance(state.message, AgentStateMessageOutput)
    assert state.message.state == '{"n":1}'
    assert state.message.role is MessageRole.assistant
    assert state.message_id == state.message.id == "run-1:8"  # the same on every replay


async def test_a_meta_event_is_a_langgraph_interrupt() -> None:
    payload = await _payloads().build(
        LoggedEvent(3, "meta_event", {"name": "LangGraphInterruptEvent", "value": {"ask": "ok?"}})
    )

    assert isinstance(payload.meta_event, LangGraphInterruptEvent)
    assert payload.meta_event.value == '{"ask":"ok?"}'


async def test_run_finished_carries_the_runs_status() -> None:
    succeeded = await _payloads().build(LoggedEvent(9, "run_finished", {"status": "succeeded"}))
    cancelled = await _payloads().build(LoggedEvent(9, "run_finished", {"status": "cancelled"}))

    assert isinstance(succeeded.status, SuccessResponseStatus)
    assert isinstance(cancelled.status, FailedResponseStatus)
    assert cancelled.status.reason is FailedResponseStatusReason.UNKNOWN_ERROR
    assert cancelled.status.details["code"] == "CANCELLED"


async def test_a_lost_worker_ends_as_an_interrupted_stream() -> None:
    payloads = _payloads()
    error = await payloads.build(
        LoggedEvent(5, "run_error", {"message": "gone", "code": "WORKER_LOST", "details": {}})
    )
    finished = await payloads.build(LoggedEvent(6, "run_finished", {"status": "failed"}))

    assert error.error == "gone"
    assert isinstance(finished.status, FailedResponseStatus)
    assert finished.status.reason is FailedResponseStatusReason.MESSAGE_STREAM_INTERRUPTED
    assert finished.status.details == {"description": "gone", "code": "WORKER_LOST"}


async def test_a_failed_run_whose_error_was_not_streamed_reads_it_from_the_log() -> None:
    async def lookup() -> RunError:
        return RunError(message="upstream said no", code="UPSTREAM_ERROR")

    finished = await _payloads(lookup_error=lookup).build(
        LoggedEvent(12, "run_finished", {"status": "failed"})
    )

    assert isinstance(finished.status, FailedResponseStatus)
    assert finished.status.details["description"] == "upstream said no"
    assert finished.status.details["code"] == "UPSTREAM_ERROR"


@pytest.mark.django_db(transaction=True)
async def test_a_server_action_streams_its_call_and_result(
    open_socket: OpenSocket, fake_upstream: Any
) -> None:
    settings = {
        **RUNTIME_SETTINGS,
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": fake_upstream.base_url,
        "ACTIONS": ["tests.support.actions.server_add"],
    }
    directive = {
        "steps": [
            {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 2}}]},
            {"text": "The sum is 3"},
        ]
    }
    with override_settings(COPILOT_RUNTIME=settings):
        socket = await open_socket(TRANSPORT)
        await socket.init()
        await socket.subscribe("1", COPILOT_STREAM, {"data": generate_data(fake(directive))})
        payloads = payloads_of(await socket.until_done("1"), "copilotStream")
        await run_ended(payloads[0]["runId"])

    start = next(p for p in payloads if p["type"] == "action_start")
    assert start["message"] == {
        "__typename": "ActionExecutionMessageOutput",
        "id": start["messageId"],
        "name": "serverAdd",
        "arguments": [],
    }
    arguments = "".join(
        p["delta"]
        for p in payloads
        if p["type"] == "action_args" and p["messageId"] == start["messageId"]
    )
    assert arguments.replace(" ", "") == '{"a":1,"b":2}'
    result = next(p for p in payloads if p["type"] == "action_result")
    assert result["message"]["__typename"] == "ResultMessageOutput"
    assert result["message"]["actionExecutionId"] == start["messageId"]
    assert json.loads(result["message"]["result"]) == {"sum": 3}
    assert payloads[-1]["status"]["code"] == "Success"
