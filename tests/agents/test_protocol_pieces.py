"""Small pieces of the agent protocols: JSON Patch, SSE framing, remote action schemas and the
answer to an interrupt."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agents.agui_client.sse import sse_data
from agents.interrupts import interrupt_answer, langgraph_interrupt
from agents.remote.actions import json_schema_from_parameters
from copilot_runtime.events.state_patch import JsonPatchError, apply_patch


def test_json_patch_applies_every_operation_without_touching_the_original() -> None:
    original = {"a": 1, "list": [1, 2], "nested": {"x": "y"}, "slash/key": 0}

    patched = apply_patch(
        original,
        [
            {"op": "add", "path": "/list/-", "value": 3},
            {"op": "add", "path": "/list/0", "value": 0},
            {"op": "remove", "path": "/a"},
            {"op": "replace", "path": "/nested/x", "value": "z"},
            {"op": "copy", "from": "/nested", "path": "/copied"},
            {"op": "move", "from": "/slash~1key", "path": "/moved"},
            {"op": "test", "path": "/moved", "value": 0},
        ],
    )

    assert patched == {
        "list": [0, 1, 2, 3],
        "nested": {"x": "z"},
        "copied": {"x": "z"},
        "moved": 0,
    }
    assert original == {"a": 1, "list": [1, 2], "nested": {"x": "y"}, "slash/key": 0}


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "replace", "path": "/missing", "value": 1},
        {"op": "remove", "path": "/list/9"},
        {"op": "test", "path": "/list/0", "value": 99},
        {"op": "add", "path": "no-slash", "value": 1},
        {"op": "frobnicate", "path": "/list"},
    ],
)
def test_json_patch_refuses_what_does_not_apply(operation: dict) -> None:
    with pytest.raises(JsonPatchError):
        apply_patch({"list": [1]}, [operation])


async def test_sse_data_joins_data_lines_and_skips_comments_and_fields() -> None:
    async def lines() -> AsyncIterator[str]:
        for line in [
            ": keep-alive",
            "",
            "event: message",
            'data: {"a":',
            "data: 1}",
            "id: 7",
            "",
            "data:no-space",
            "",
            "data: never terminated",
        ]:
            yield line

    assert [data async for data in sse_data(lines())] == ['{"a":\n1}', "no-space"]


def test_copilotkit_parameters_become_a_json_schema() -> None:
    schema = json_schema_from_parameters(
        [
            {"name": "city", "type": "string", "description": "Where", "enum": ["Oslo", "Rome"]},
            {"name": "days", "type": "number", "required": False},
            {"name": "tags", "type": "string[]"},
            {
                "name": "traveller",
                "type": "object",
                "attributes": [{"name": "age", "type": "number"}],
            },
            {"name": "stops", "type": "object[]", "attributes": [{"name": "at"}]},
        ]
    )

    assert schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "enum": ["Oslo", "Rome"], "description": "Where"},
            "days": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "traveller": {
                "type": "object",
                "properties": {"age": {"type": "number"}},
                "required": ["age"],
            },
            "stops": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"at": {"type": "string"}},
                    "required": ["at"],
                },
            },
        },
        "required": ["city", "tags", "traveller", "stops"],
    }


def test_an_answer_is_completed_from_the_pending_interrupt() -> None:
    pending = [langgraph_interrupt({"q": 1}, interrupt_ids=("i-1",))]

    answer = interrupt_answer(
        [{"name": "LangGraphInterruptEvent", "value": "", "response": "yes"}], pending
    )

    assert answer is not None
    assert (answer.value, answer.response, answer.interrupt_ids) == ('{"q":1}', "yes", ("i-1",))


@pytest.mark.parametrize(
    "meta_events",
    [
        [],
        [{"name": "LangGraphInterruptEvent", "value": "v"}],  # no response yet
        [{"name": "SomethingElse", "value": "v", "response": "r"}],
    ],
)
def test_no_answer_without_a_response_to_an_interrupt(meta_events: list) -> None:
    assert interrupt_answer(meta_events, []) is None
