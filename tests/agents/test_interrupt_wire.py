"""Interrupts on the v1 wire (the dedicated encoder): both meta event shapes of the TypeScript
runtime, and meta events that are not interrupts kept off the wire."""

from __future__ import annotations

import json

from agents.interrupts import copilotkit_interrupt, langgraph_interrupt
from copilot_runtime.events import MetaEvent, RunFinished
from copilot_runtime.graphql.fastpath.encoder import ROOT, V1Encoder


def test_a_langgraph_interrupt_is_a_metaevents_item() -> None:
    entries, _ = V1Encoder().encode([langgraph_interrupt({"question": "Approve?"})])

    assert entries == [
        {
            "items": [
                {
                    "type": "MetaEvent",
                    "name": "LangGraphInterruptEvent",
                    "value": '{"question":"Approve?"}',
                    "__typename": "LangGraphInterruptEvent",
                }
            ],
            "path": [ROOT, "metaEvents", 0],
        }
    ]


def test_the_raw_on_interrupt_name_is_streamed_as_a_langgraph_interrupt() -> None:
    entries, _ = V1Encoder().encode([MetaEvent(name="on_interrupt", value="plain text")])

    (item,) = entries[0]["items"]
    assert (item["name"], item["__typename"], item["value"]) == (
        "LangGraphInterruptEvent",
        "LangGraphInterruptEvent",
        "plain text",
    )


def test_a_copilotkit_interrupt_carries_its_value_and_messages() -> None:
    event = copilotkit_interrupt(
        {"question": "Ship?"},
        messages=[
            {"id": "m1", "role": "assistant", "content": "Order #42."},
            {"id": "c1", "name": "showOrder", "arguments": {"order": 42}, "parentMessageId": "m1"},
        ],
    )

    entries, _ = V1Encoder().encode([event])

    item_entry, *statuses = entries
    assert item_entry["path"] == [ROOT, "metaEvents", 0]
    (item,) = item_entry["items"]
    assert (item["type"], item["name"], item["__typename"]) == (
        "MetaEvent",
        "CopilotKitLangGraphInterruptEvent",
        "CopilotKitLangGraphInterruptEvent",
    )
    data = item["data"]
    assert data["__typename"] == "CopilotKitLangGraphInterruptEventData"
    assert json.loads(data["value"]) == {"question": "Ship?"}
    text_message, call_message = data["messages"]
    assert {k: text_message[k] for k in ("__typename", "id", "content", "role")} == {
        "__typename": "TextMessageOutput",
        "id": "m1",
        "content": ["Order #42."],
        "role": "assistant",
    }
    assert {k: call_message[k] for k in ("__typename", "id", "name", "parentMessageId")} == {
        "__typename": "ActionExecutionMessageOutput",
        "id": "c1",
        "name": "showOrder",
        "parentMessageId": "m1",
    }
    assert [json.loads(a) for a in call_message["arguments"]] == [{"order": 42}]
    # Each message's (deferred) status follows as a data patch at its path.
    assert statuses == [
        {
            "data": {
                "status": {"code": "Success", "__typename": "SuccessMessageStatus"},
                "__typename": typename,
            },
            "path": [ROOT, "metaEvents", 0, "data", "messages", position],
        }
        for position, typename in enumerate(["TextMessageOutput", "ActionExecutionMessageOutput"])
    ]


def test_other_meta_events_stay_off_the_wire_and_do_not_take_an_index() -> None:
    encoder = V1Encoder()
    entries, _ = encoder.encode(
        [
            MetaEvent(name="PredictState", value=[{"tool": "x"}]),
            MetaEvent(name="Exit", value=True),
            langgraph_interrupt("ok?"),
        ]
    )

    assert [entry["path"] for entry in entries] == [[ROOT, "metaEvents", 0]]


def test_an_interrupted_run_answers_success_like_the_typescript_runtime() -> None:
    encoder = V1Encoder()
    encoder.encode([langgraph_interrupt("ok?")])

    entries, finished = encoder.encode([RunFinished(status="interrupted")])

    assert finished
    assert entries[0]["data"]["status"] == {
        "code": "Success",
        "__typename": "SuccessResponseStatus",
    }
