"""One event sequence through every v1 path: the fast-path encoder (wire JSON), the
``generateCopilotResponse`` resolver's pump (GraphQL objects) and the subscription payloads
(from the run's log) must say the same about agent states and interrupts."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from conversations.services.runs import LoggedEvent
from copilot_runtime.engine.service import StartedTurn
from copilot_runtime.events import AgentStateSnapshot, Event, MetaEvent, RunFinished
from copilot_runtime.graphql.fastpath.encoder import V1Encoder
from copilot_runtime.graphql.resolvers.generate import _END, _Pump
from copilot_runtime.graphql.types.run_events import RunEventPayloads

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


def fast_path() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    entries, _ = V1Encoder().encode(EVENTS)
    items = [item for entry in entries for item in entry.get("items", [])]
    states = [item for item in items if item.get("__typename") == "AgentStateMessageOutput"]
    metas = [item for item in items if item.get("type") == "MetaEvent"]
    return states, metas


async def pumped() -> tuple[list[Any], list[Any]]:
    queue: asyncio.Queue[Event | None] = asyncio.Queue()
    for event in EVENTS:
        queue.put_nowait(event)
    queue.put_nowait(None)
    pump = _Pump(StartedTurn(run_id="r-1", thread_id="t-1", events=queue, detach=lambda: None))
    await pump.run()
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
