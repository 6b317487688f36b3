"""A worker reading the request a run's task carries whole: the messages of the history it
knows of the thread (its last run's there, copilot_runtime/history) are taken as they were
made, found by equality of their payloads; only the others are made
(``request_from_text``, copilot_runtime/runs/task_history.py)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from copilot_runtime.events.request import InputMessage, TurnRequest, turn_request_to_json
from copilot_runtime.history import HISTORIES
from copilot_runtime.runs import task_history
from copilot_runtime.runs.task_history import request_from_text
from tests.copilot_runtime.events.test_request_payload import every_field_set

THREAD = 7  # the stored thread's primary key, which the task's placement names


def _plain_request() -> TurnRequest:
    """A history of messages holding only strings (known again by equality)."""
    messages = [
        InputMessage(id="p1", kind="text", role="user", content="hi"),
        InputMessage(id="p2", kind="text", role="assistant", content="hello"),
        InputMessage(id="p3", kind="action_execution", action_name="look", arguments={"q": "x"}),
        InputMessage(id="p4", kind="result", action_execution_id="p3", result="found"),
    ]
    return dataclasses.replace(every_field_set(), messages=messages)


def _next_turn(request: TurnRequest, *contents: str) -> TurnRequest:
    start = len(request.messages)
    added = [
        InputMessage(id=f"n{start + index}", kind="text", role="user", content=content)
        for index, content in enumerate(contents)
    ]
    return dataclasses.replace(request, messages=[*request.messages, *added])


def _read(request: TurnRequest, thread_pk: int | None = THREAD) -> TurnRequest:
    return request_from_text(turn_request_to_json(request), thread_pk)


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the messages the worker makes from their payloads, in order."""
    seen: list[str] = []
    make = task_history.message_from_payload

    def counting(raw: dict[str, Any]) -> InputMessage:
        seen.append(raw["id"])
        return make(raw)

    monkeypatch.setattr(task_history, "message_from_payload", counting)
    return seen


def test_the_next_turn_of_a_thread_takes_its_history_as_made_before(made: list[str]) -> None:
    first = _plain_request()
    second = _next_turn(first, "and tomorrow?", "and the day after?")

    made_first = _read(first)
    made_second = _read(second)

    assert made_second == second
    assert all(a is b for a, b in zip(made_first.messages, made_second.messages, strict=False))
    assert made == ["p1", "p2", "p3", "p4", "n4", "n5"]  # each message once
    assert made_second.history is HISTORIES.of_thread(THREAD)


def test_a_turn_re_sending_the_history_alone_makes_none_of_it(made: list[str]) -> None:
    first = _plain_request()

    made_first, made_again = _read(first), _read(first)

    assert made_again == first
    assert all(a is b for a, b in zip(made_first.messages, made_again.messages, strict=True))
    assert made == ["p1", "p2", "p3", "p4"]


def test_messages_are_known_by_equality_up_to_the_first_holding_a_number() -> None:
    """A tool call's arguments or an agent's state may hold numbers and Booleans, which compare
    equal across types (``True == 1``): such a message, and the history after it, is made
    anew."""
    first = every_field_set()
    second = _next_turn(first, "and tomorrow?")

    made_first, made_second = _read(first), _read(second)

    assert made_second == second
    same = [a is b for a, b in zip(made_first.messages, made_second.messages, strict=False)]
    assert same == [True, False, False, False, False]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda m: [dataclasses.replace(m[0], content="edited"), *m[1:]], id="edited"),
        pytest.param(lambda m: m[:-1], id="regenerated (its last message gone)"),
        pytest.param(lambda m: [*m[:2], *m[3:]], id="a message removed"),
    ],
)
def test_a_history_changed_since_the_last_turn_reads_as_it_is_written(
    change: Callable[[list[InputMessage]], list[InputMessage]],
) -> None:
    first = _plain_request()
    changed = dataclasses.replace(first, messages=change(list(first.messages)))
    second = _next_turn(changed, "again")

    _read(first)

    assert _read(second) == second


def test_a_thread_knows_only_its_own_history(made: list[str]) -> None:
    _read(_plain_request(), thread_pk=1)
    other = TurnRequest(thread_id="t2", messages=[InputMessage(id="o1", kind="text", content="x")])

    read = _read(_next_turn(other, "y"), thread_pk=2)

    assert [m.id for m in read.messages] == ["o1", "n1"]
    assert made == ["p1", "p2", "p3", "p4", "o1", "n1"]


def test_without_a_thread_nothing_is_known() -> None:
    request = _plain_request()

    assert _read(request, thread_pk=None) == request
    assert len(HISTORIES) == 0


def test_a_text_written_otherwise_reads_as_it_is_written() -> None:
    request = every_field_set()
    # The same request as the standard library writes it (spaces after the separators), its
    # messages alone so written, or with its messages last, as earlier versions wrote it.
    payload = orjson.loads(turn_request_to_json(request))
    spaced = json.dumps(payload)
    rest = orjson.dumps({k: v for k, v in payload.items() if k != "messages"}).decode()
    head = '{"messages":['
    spaced_messages = head + ",".join(json.dumps(m) for m in payload["messages"]) + "]," + rest[1:]
    messages_last = orjson.dumps(
        {**{k: v for k, v in payload.items() if k != "messages"}, "messages": payload["messages"]}
    ).decode()

    for text in (spaced, spaced_messages, messages_last):
        assert request_from_text(text, THREAD) == request
        assert request_from_text(text, THREAD) == request


def test_a_message_carried_again_with_another_content_is_made_anew() -> None:
    def carried(content: str) -> InputMessage:
        message = InputMessage(id="m1", kind="text", role="user", content=content)
        return _read(TurnRequest(thread_id="t1", messages=[message])).messages[0]

    assert carried("hi").content == "hi"
    assert carried("edited").content == "edited"


def test_a_tool_call_whose_arguments_only_compare_equal_is_made_anew() -> None:
    def carried(value: object) -> InputMessage:
        call = InputMessage(
            id="call-1", kind="action_execution", action_name="flag", arguments={"on": value}
        )
        return _read(TurnRequest(thread_id="t1", messages=[call])).messages[0]

    assert carried(1).arguments == {"on": 1}
    # {"on": True} == {"on": 1} in Python: a known call would hand back the 1.
    assert carried(True).arguments["on"] is True
