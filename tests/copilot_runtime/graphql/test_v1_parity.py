"""One event sequence through every v1 path: the fast-path encoder (wire JSON), the
``generateCopilotResponse`` resolver's pump (GraphQL objects) and the subscription payloads
(from the run's log) must say the same about messages, statuses, agent states and
interrupts."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from conversations.services.runs import LoggedEvent
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    MetaEvent,
    RunError,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.graphql.fastpath.encoder import V1Encoder
from copilot_runtime.graphql.resolvers.generate import _END, _Pump
from copilot_runtime.graphql.types.run_events import RunEventPayloads
from copilot_runtime.graphql.v1_rules import ROOT
from copilot_runtime.runs.inbox import Inbox
from copilot_runtime.runs.start import StartedTurn

STATE = AgentStateSnapshot(
    thread_id="t-1",
    agent_name="travel",
    state={"city": "Lisbon", "days": 3},
    node_name="plan",
    run_id="r-1",
    active=True,
    running=False,
    role="assistant",
)
INTERRUPT = MetaEvent(
    name="CopilotKitLangGraphInterruptEvent",
    data={
        "value": {"question": "Book it?"},
        "messages": [
            {"id": "call-1", "name": "book", "arguments": {"hotel": "Alfama"}},
            {"id": "res-1", "actionExecutionId": "call-1", "actionName": "book", "result": "ok"},
            {"id": "txt-1", "role": "assistant", "content": "Shall I book it?"},
        ],
    },
)
EVENTS: list[Event] = [STATE, INTERRUPT, RunFinished(status="interrupted")]


def fast_path(events: list[Event] = EVENTS) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    entries, _ = V1Encoder().encode(events)
    items = [item for entry in entries for item in entry.get("items", [])]
    states = [item for item in items if item.get("__typename") == "AgentStateMessageOutput"]
    metas = [item for item in items if item.get("type") == "MetaEvent"]
    return states, metas


async def _pumped_to_the_end(events: list[Event]) -> _Pump:
    inbox: Inbox[Event | None] = Inbox()
    for event in events:
        inbox.put_nowait(event)
    inbox.put_nowait(None)
    pump = _Pump(StartedTurn(run_id="r-1", thread_id="t-1", events=inbox, detach=lambda: None))
    await pump.run()
    return pump


async def pumped(events: list[Event] = EVENTS) -> tuple[list[Any], list[Any]]:
    pump = await _pumped_to_the_end(events)
    messages, metas = [], []
    while (message := pump.messages.get_nowait()) is not _END:
        messages.append(message)
    while (meta := pump.meta_events.get_nowait()) is not _END:
        metas.append(meta)
    return messages, metas


async def subscribed() -> list[Any]:
    builder = RunEventPayloads(run_id="r-1", thread_id="t-1")
    payloads = [
        await builder.build(LoggedEvent(seq=seq, type=event.type, payload=event.to_payload()))
        for seq, event in enumerate(EVENTS[:2], start=1)
    ]
    return payloads


def messages_of(meta: Any) -> list[tuple[str, str]]:
    return [(type(m).__name__, m.id) for m in meta.data.messages]


async def test_every_v1_path_streams_the_agent_state() -> None:
    states, _ = fast_path()
    messages, _ = await pumped()
    payloads = await subscribed()

    [wire] = states
    [pumped_state] = messages
    subscription_state = payloads[0].message
    for built in (pumped_state, subscription_state):
        assert (
            built.thread_id,
            built.agent_name,
            built.node_name,
            built.run_id,
            built.active,
            built.running,
            built.role.value,
            orjson.loads(built.state),
        ) == (
            wire["threadId"],
            wire["agentName"],
            wire["nodeName"],
            wire["runId"],
            wire["active"],
            wire["running"],
            wire["role"],
            orjson.loads(wire["state"]),
        )


async def test_every_v1_path_carries_the_interrupt_with_its_messages() -> None:
    _, wire_metas = fast_path()
    _, pumped_metas = await pumped()
    subscription_meta = (await subscribed())[1].meta_event

    [wire] = wire_metas
    expected_messages = [(m["__typename"], m["id"]) for m in wire["data"]["messages"]]
    assert expected_messages == [
        ("ActionExecutionMessageOutput", "call-1"),
        ("ResultMessageOutput", "res-1"),
        ("TextMessageOutput", "txt-1"),
    ]
    for built in (pumped_metas[0], subscription_meta):
        assert type(built).__name__ == wire["__typename"]
        assert orjson.loads(built.data.value) == orjson.loads(wire["data"]["value"])
        assert messages_of(built) == expected_messages


def _conversation(ending: list[Event]) -> list[Event]:
    return [
        TextStart(message_id="m-1"),
        TextDelta(message_id="m-1", delta="Let me "),
        TextDelta(message_id="m-1", delta="check."),
        TextEnd(message_id="m-1"),
        ActionStart(action_execution_id="call-1", action_name="lookup", parent_message_id="m-1"),
        ActionArgs(action_execution_id="call-1", delta='{"q":'),
        ActionArgs(action_execution_id="call-1", delta='"x"}'),
        ActionEnd(action_execution_id="call-1"),
        ActionResult(action_execution_id="call-1", action_name="lookup", result="found"),
        TextStart(message_id="m-2"),
        TextDelta(message_id="m-2", delta="It is"),
        *ending,
    ]


SUCCEEDED = _conversation([TextEnd(message_id="m-2"), RunFinished()])
FAILED = _conversation(
    [RunError(message="upstream said 500", code="UPSTREAM_500"), RunFinished(status="failed")]
)
CANCELLED = _conversation([RunFinished(status="cancelled")])


def wire_response(events: list[Event]) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    """(typename, id, streamed text, status code, failure reason) per message, and the
    response status, as a client would assemble them from the fast path's patches."""
    entries, finished = V1Encoder().encode(events)
    assert finished
    messages: list[dict[str, Any]] = []
    response: dict[str, Any] = {}
    for entry in entries:
        path = entry["path"]
        if path == [ROOT]:
            response = entry["data"]["status"]
        elif len(path) == 3 and "items" in entry:
            messages.extend(dict(item) for item in entry["items"])
        elif len(path) == 3:
            messages[path[2]]["status"] = entry["data"]["status"]
        else:
            messages[path[2]][path[3]] = [*messages[path[2]][path[3]], *entry["items"]]
    return [
        (
            m["__typename"],
            m["id"],
            "".join(m.get("content") or m.get("arguments") or [m.get("result", "")]),
            m["status"]["code"],
            m["status"].get("reason"),
        )
        for m in messages
    ], response


async def pumped_response(events: list[Event]) -> tuple[list[tuple[Any, ...]], Any]:
    pump = await _pumped_to_the_end(events)
    rows = []
    while (message := pump.messages.get_nowait()) is not _END:
        # The sources the objects' streamed and deferred fields resolve from.
        streamed = getattr(message, "content_source", None) or getattr(
            message, "arguments_source", None
        )
        text = (
            "".join([chunk async for chunk in streamed]) if streamed is not None else message.result
        )
        status = message.status_source
        if isinstance(status, asyncio.Future):
            status = await status
        rows.append(
            (
                type(message).__name__,
                message.id,
                text,
                _code(status),
                getattr(status, "reason", None),
            )
        )
    return rows, await pump.status


async def subscription_status(events: list[Event]) -> Any:
    builder = RunEventPayloads(run_id="r-1", thread_id="t-1")
    payloads = [
        await builder.build(LoggedEvent(seq=seq, type=event.type, payload=event.to_payload()))
        for seq, event in enumerate(events, start=1)
    ]
    ids = [p.message.id for p in payloads if p.message is not None]
    return ids, payloads[-1].status


def _code(status: Any) -> str:
    code = status.code  # a status object's ``code`` is a field resolver
    code = code() if callable(code) else code
    return getattr(code, "value", code)


def _status_fields(status: Any) -> tuple[Any, ...]:
    if isinstance(status, dict):
        return status["code"], status.get("reason"), status.get("details")
    reason = getattr(status, "reason", None)
    return _code(status), getattr(reason, "name", reason), getattr(status, "details", None)


@pytest.mark.parametrize("events", [SUCCEEDED, FAILED, CANCELLED], ids=["ok", "failed", "stop"])
async def test_every_v1_path_ends_messages_and_the_response_alike(events: list[Event]) -> None:
    wire_rows, wire_status = wire_response(events)
    pumped_rows, pumped_status = await pumped_response(events)
    subscribed_ids, subscribed_status = await subscription_status(events)

    assert pumped_rows == wire_rows
    assert subscribed_ids == [row[1] for row in wire_rows]
    assert [row[:3] for row in wire_rows] == [
        ("TextMessageOutput", "m-1", "Let me check."),
        ("ActionExecutionMessageOutput", "call-1", '{"q":"x"}'),
        ("ResultMessageOutput", "result-call-1", "found"),
        ("TextMessageOutput", "m-2", "It is"),
    ]
    assert _status_fields(pumped_status) == _status_fields(wire_status)
    assert _status_fields(subscribed_status) == _status_fields(wire_status)


async def test_the_last_open_message_fails_with_the_reason_of_the_run_s_end() -> None:
    ok, _ = wire_response(SUCCEEDED)
    failed, failed_status = wire_response(FAILED)
    stopped, stopped_status = wire_response(CANCELLED)

    assert ok[-1][3:] == ("Success", None)
    assert failed[-1][3:] == ("Failed", "Error streaming message content")
    assert stopped[-1][3:] == ("Failed", "The run was stopped before this message finished.")
    assert failed_status["details"]["code"] == "UPSTREAM_500"
    assert stopped_status["details"]["code"] == "CANCELLED"
