"""The client mutation's variables made plain without graphql-core agree with graphql-core."""

from __future__ import annotations

import json
from typing import Any

import pytest
from graphql import OperationDefinitionNode, parse
from graphql.execution.values import get_variable_values
from hypothesis import HealthCheck, event, given, settings

from benchmarks.client_request import request_variables
from copilot_runtime.graphql.fastpath import variables as fast_variables
from copilot_runtime.graphql.fastpath.documents import client_mutation_printed
from copilot_runtime.graphql.fastpath.variables import plain_client_variables
from copilot_runtime.graphql.input_conversion import coerced_to_plain
from copilot_runtime.graphql.schema import schema
from copilot_runtime.graphql.turn_input import (
    PARSED,
    parse_generate_input,
    parsed_range,
    v1_history,
)
from copilot_runtime.history import KnownHistory
from tests.fuzz import strategies

_OPERATION = next(
    definition
    for definition in parse(client_mutation_printed()).definitions
    if isinstance(definition, OperationDefinitionNode)
)


def _by_graphql_core(variables: dict[str, Any]) -> Any:
    coerced = get_variable_values(schema._schema, _OPERATION.variable_definitions, variables)
    if isinstance(coerced, list):
        return None
    values = coerced.coerced
    return coerced_to_plain(values["data"]), coerced_to_plain(values.get("properties"))


def _as_sent(value: Any) -> Any:
    """What the server reads: the value through JSON (big integers and all)."""
    return json.loads(strategies.body_bytes(value))


def test_the_clients_own_variables_take_the_fast_way_and_agree() -> None:
    variables = request_variables(thread_id="t", tokens=3)
    variables["data"]["cloud"] = {"guardrails": {"inputValidationRules": {}}}

    fast = plain_client_variables(variables)

    assert fast is not None
    assert fast == _by_graphql_core(variables)
    # The input's default, as graphql-core fills it in.
    assert fast[0]["cloud"]["guardrails"]["inputValidationRules"] == {
        "allowList": [],
        "denyList": [],
    }


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=strategies.v1_data, properties=strategies.v1_properties)
def test_whatever_the_fast_way_accepts_graphql_core_makes_the_same(
    data: Any, properties: Any
) -> None:
    variables = _as_sent({"data": data, "properties": properties})

    fast = plain_client_variables(variables)

    event("fast" if fast is not None else "left to graphql-core")
    if fast is not None:
        assert fast == _by_graphql_core(variables)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(data=strategies.v1_data)
def test_what_graphql_core_refuses_the_fast_way_leaves_to_it(data: Any) -> None:
    variables = _as_sent({"data": data})

    if _by_graphql_core(variables) is None:
        assert plain_client_variables(variables) is None


def test_explicit_nulls_and_absent_fields_come_out_as_graphql_core_makes_them() -> None:
    variables = request_variables(thread_id="t", tokens=3)
    data = variables["data"]
    data["frontend"]["url"] = None
    data["messages"][0]["textMessage"]["parentMessageId"] = None
    del data["forwardedParameters"]
    variables["properties"] = None

    fast = plain_client_variables(variables)

    assert fast is not None
    assert fast == _by_graphql_core(variables)
    assert fast[0]["frontend"]["url"] is None and "forwardedParameters" not in fast[0]


def _agent_state_message(message_id: str, *, thread_id: str) -> dict[str, Any]:
    return {
        "id": message_id,
        "createdAt": "2026-11-25T10:00:00.000Z",
        "agentStateMessage": {
            "threadId": thread_id,
            "agentName": "a",
            "role": "assistant",
            "state": "{}",
            "running": True,
            "nodeName": "n",
            "runId": "r",
            "active": True,
        },
    }


def _entered(variables: dict[str, Any]) -> KnownHistory | None:
    """The request's history, entering before the check as the fast path enters it."""
    return v1_history(variables.get("data"), None)


def _turn(variables: dict[str, Any]) -> tuple[dict[str, Any], Any] | None:
    """The fast check of a request's variables, then its parse, as the fast path does them."""
    history = _entered(variables)
    plain = plain_client_variables(variables, history)
    if plain is not None:
        parse_generate_input(*plain, history)
    return plain


def test_a_re_sent_message_is_recognised_only_when_it_is_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The history comes back every turn: a message the thread's known history holds parsed
    (an equal one) is not checked again, the same id with other content is, and an agent
    state's Boolean is never taken for a number that compares equal to it."""
    variables = request_variables(thread_id="t", tokens=3)
    variables["data"]["messages"][0]["id"] = "re-sent-1"
    assert _turn(variables) is not None  # checked, then parsed: known

    again = json.loads(json.dumps(variables))
    assert parsed_range(_entered(again), again["data"]["messages"]) == (0, 1)
    edited = json.loads(json.dumps(variables))
    edited["data"]["messages"][0]["textMessage"]["content"] = "Something else"
    edited_history = _entered(edited)
    assert parsed_range(edited_history, edited["data"]["messages"]) == (0, 0)
    made = plain_client_variables(edited, edited_history)
    assert made is not None
    assert made[0]["messages"][0]["textMessage"]["content"] == "Something else"

    # Not checked again: were a known history to hold a message the check refuses, it would
    # pass as sent. (It cannot: only checked messages reach the parser.)
    refused = json.loads(json.dumps(variables))
    refused["data"]["messages"][0]["textMessage"]["content"] = 7
    assert plain_client_variables(refused, _entered(refused)) is None
    monkeypatch.setattr(fast_variables, "parsed_range", lambda history, raws: (0, 1))
    passed = plain_client_variables(refused, _entered(refused))
    assert passed is not None
    assert passed[0]["messages"][0] is refused["data"]["messages"][0]
    monkeypatch.undo()

    state = _agent_state_message("state-1", thread_id="t")
    with_state = json.loads(json.dumps(variables))
    with_state["data"]["messages"].append(state)
    assert _turn(with_state) == _by_graphql_core(with_state)
    as_number = json.loads(json.dumps(with_state))
    as_number["data"]["messages"][-1]["agentStateMessage"]["running"] = 1
    assert _by_graphql_core(as_number) is None
    assert plain_client_variables(as_number, _entered(as_number)) is None


def test_a_value_already_plain_is_kept_as_sent_and_one_that_is_not_is_made_anew() -> None:
    """What the clients send is already plain: kept, not copied (a remembered message is
    then held once). A value the coercion changes, or completes with a default, is a copy."""
    variables = request_variables(thread_id="t-plain", tokens=3)
    data = variables["data"]
    data["messages"][0]["id"] = "plain-1"

    fast = plain_client_variables(variables)

    assert fast is not None
    assert fast[0]["messages"][0] is data["messages"][0]
    assert fast[0]["frontend"] is data["frontend"]

    as_int = json.loads(json.dumps(variables))
    as_int["data"]["forwardedParameters"]["temperature"] = 1  # a Float sent as an int
    made = plain_client_variables(as_int)
    assert made is not None
    assert made[0]["forwardedParameters"] is not as_int["data"]["forwardedParameters"]
    assert made[0]["forwardedParameters"]["temperature"] == 1.0
    assert made == _by_graphql_core(as_int)


def _turns(thread: str, count: int) -> dict[str, Any]:
    """The client's variables on a thread's ``count``-th turn: the history, then a new message."""
    variables = request_variables(thread_id=thread, tokens=3)
    template = variables["data"]["messages"][0]
    variables["data"]["messages"] = [
        {
            **template,
            "id": f"{thread}-{i}",
            "createdAt": "2026-11-25T10:00:00.000Z",
            "textMessage": {"content": f"m{i}", "role": "user"},
        }
        for i in range(count)
    ]
    return variables


def test_a_re_sent_history_is_recognised_together_and_only_new_messages_are_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A thread's history comes back whole with each turn: the check recognises the part the
    parser made before as one list, and checks only the new messages."""
    first = _turns("whole", 3)
    first_history = _entered(first)
    plain = plain_client_variables(first, first_history)
    assert plain is not None
    earlier = parse_generate_input(*plain, first_history).messages

    checked: list[list[str]] = []
    plan = fast_variables._data_plan()

    def recording(data: Any) -> Any:
        checked.append([message["id"] for message in data["messages"]])
        return plan(data)

    monkeypatch.setattr(fast_variables, "_data_plan", lambda: recording)
    again = _as_sent(_turns("whole", 5))
    history = _entered(again)
    made = plain_client_variables(again, history)

    assert made is not None
    assert made == _by_graphql_core(again)
    assert checked == [["whole-3", "whole-4"]]
    parsed = parse_generate_input(*made, history).messages
    assert [m.content for m in parsed] == ["m0", "m1", "m2", "m3", "m4"]
    assert all(a is b for a, b in zip(parsed[:3], earlier, strict=True))
    assert history is not None and history.reuse(PARSED, again["data"]["messages"])[:2] == (0, 5)


def test_a_changed_message_in_a_re_sent_history_is_checked_again() -> None:
    assert _turn(_turns("edit", 3)) is not None

    refused = _turns("edit", 4)
    refused["data"]["messages"][1]["textMessage"]["content"] = 7
    assert plain_client_variables(refused, _entered(refused)) is None

    edited = _turns("edit", 4)
    edited["data"]["messages"][1]["textMessage"]["content"] = "edited"
    history = _entered(edited)
    made = plain_client_variables(edited, history)
    assert made is not None
    assert [m.content for m in parse_generate_input(*made, history).messages] == [
        "m0",
        "edited",
        "m2",
        "m3",
    ]


def test_a_history_is_recognised_together_only_up_to_an_agent_state_message() -> None:
    """An agent state's Booleans compare equal to numbers (True == 1): a history holding one
    is recognised by equality only before it, so a number sent for its Boolean is refused."""
    variables = _turns("state", 2)
    variables["data"]["messages"].append(_agent_state_message("state-s", thread_id="state"))
    assert _turn(variables) is not None

    as_number = json.loads(json.dumps(variables))
    as_number["data"]["messages"][-1]["agentStateMessage"]["active"] = 1
    assert _by_graphql_core(as_number) is None
    assert plain_client_variables(as_number, _entered(as_number)) is None
