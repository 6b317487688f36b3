"""A worker reading the request its run task carries: the history it read from the thread's
previous task is recognised by its text and not read again (copilot_runtime/events/carried.py)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator

import orjson
import pytest

from copilot_runtime.events import request as request_module
from copilot_runtime.events.carried import HEAD, CarriedHistories
from copilot_runtime.events.recent import RecentStore
from copilot_runtime.events.request import (
    InputMessage,
    TurnRequest,
    turn_request_from_json,
    turn_request_to_json,
)
from tests.copilot_runtime.events.test_request_payload import every_field_set


@pytest.fixture(autouse=True)
def fresh_memory(monkeypatch: pytest.MonkeyPatch) -> Iterator[CarriedHistories[InputMessage]]:
    carried: CarriedHistories[InputMessage] = CarriedHistories()
    monkeypatch.setattr(request_module, "_CARRIED_TEXTS", carried)
    yield carried


def _next_turn(request: TurnRequest, *contents: str) -> TurnRequest:
    start = len(request.messages)
    added = [
        InputMessage(id=f"n{start + index}", kind="text", role="user", content=content)
        for index, content in enumerate(contents)
    ]
    return dataclasses.replace(request, messages=[*request.messages, *added])


def _read_twice(first: TurnRequest, second: TurnRequest) -> tuple[TurnRequest, TurnRequest]:
    made_first = turn_request_from_json(turn_request_to_json(first), thread_key="t1")
    made_second = turn_request_from_json(turn_request_to_json(second), thread_key="t1")
    return made_first, made_second


def test_the_tasks_text_begins_with_the_messages() -> None:
    text = turn_request_to_json(every_field_set())

    assert text.startswith(HEAD)
    assert next(iter(orjson.loads(text))) == "messages"


def test_the_next_turn_of_a_thread_takes_its_history_as_made_before() -> None:
    first = every_field_set()
    second = _next_turn(first, "and tomorrow?", "and the day after?")

    made_first, made_second = _read_twice(first, second)

    assert made_second == second
    # Every message of the history is the very object made before, those holding nested
    # values too: their text is the same, so they read alike.
    assert all(a is b for a, b in zip(made_first.messages, made_second.messages, strict=False))
    assert made_second.messages[5].content == "and tomorrow?"


def test_only_the_text_after_the_history_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    first = every_field_set()
    second = _next_turn(first, "and tomorrow?")
    turn_request_from_json(turn_request_to_json(first), thread_key="t1")
    read: list[list[str]] = []
    loads = orjson.loads

    def recording(text: str) -> object:
        value = loads(text)
        read.append([message["id"] for message in value["messages"]])
        return value

    monkeypatch.setattr("copilot_runtime.events.carried.orjson.loads", recording)
    turn_request_from_json(turn_request_to_json(second), thread_key="t1")

    assert read == [["n5"]]


def test_a_turn_re_sending_the_history_alone_reads_none_of_it() -> None:
    first = every_field_set()

    made_first, made_again = _read_twice(first, first)

    assert made_again == first
    assert all(a is b for a, b in zip(made_first.messages, made_again.messages, strict=True))


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda m: [dataclasses.replace(m[0], content="edited"), *m[1:]], id="edited"),
        pytest.param(lambda m: m[:-1], id="regenerated (its last message gone)"),
        pytest.param(lambda m: [*m[:2], *m[3:]], id="a message removed"),
    ],
)
def test_a_history_changed_since_the_last_turn_is_read_whole(
    change: Callable[[list[InputMessage]], list[InputMessage]],
) -> None:
    first = every_field_set()
    changed = dataclasses.replace(first, messages=change(list(first.messages)))
    second = _next_turn(changed, "again")

    _, made_second = _read_twice(first, second)

    assert made_second == second


def test_a_thread_remembers_only_its_own_history() -> None:
    first = every_field_set()
    turn_request_from_json(turn_request_to_json(first), thread_key="t1")
    other = TurnRequest(thread_id="t2", messages=[InputMessage(id="o1", kind="text", content="x")])

    made = turn_request_from_json(turn_request_to_json(_next_turn(other, "y")), thread_key="t1")

    assert [m.id for m in made.messages] == ["o1", "n1"]


def test_without_a_thread_nothing_is_remembered(
    fresh_memory: CarriedHistories[InputMessage],
) -> None:
    turn_request_from_json(turn_request_to_json(every_field_set()))

    assert len(fresh_memory) == 0


def test_a_text_written_otherwise_is_read_whole_and_not_remembered(
    fresh_memory: CarriedHistories[InputMessage],
) -> None:
    request = every_field_set()
    # The same request as the standard library writes it (spaces after the separators), its
    # messages alone so written, or with its messages last, as earlier versions wrote it.
    payload = orjson.loads(turn_request_to_json(request))
    spaced = json.dumps(payload)
    rest = orjson.dumps({k: v for k, v in payload.items() if k != "messages"}).decode()
    spaced_messages = HEAD + ",".join(json.dumps(m) for m in payload["messages"]) + "]," + rest[1:]
    messages_last = orjson.dumps(
        {**{k: v for k, v in payload.items() if k != "messages"}, "messages": payload["messages"]}
    ).decode()

    for text in (spaced, spaced_messages, messages_last):
        assert turn_request_from_json(text, thread_key="t1") == request
        assert turn_request_from_json(text, thread_key="t1") == request

    assert len(fresh_memory) == 0


def test_remembered_histories_are_bounded_in_messages_oldest_out_first() -> None:
    carried: CarriedHistories[str] = CarriedHistories(RecentStore(size=5))

    def read(key: str, ids: list[str]) -> list[str]:
        text = orjson.dumps({"messages": [{"id": i} for i in ids]}).decode()
        _, made = carried.read(
            key,
            text,
            history=lambda raws: [f"whole:{raw['id']}" for raw in raws],
            more=lambda raws: [f"more:{raw['id']}" for raw in raws],
        )
        return made

    assert read("a", ["a1", "a2"]) == ["whole:a1", "whole:a2"]
    assert read("b", ["b1", "b2", "b3"]) == ["whole:b1", "whole:b2", "whole:b3"]
    assert read("a", ["a1", "a2", "a3"]) == ["whole:a1", "whole:a2", "more:a3"]
    # "a" now holds 3 messages and "b" 3: over the bound of 5, "b" (the older) went.
    assert read("b", ["b1", "b2", "b3", "b4"]) == ["whole:b1", "whole:b2", "whole:b3", "whole:b4"]
    # A history longer than the bound is never kept.
    assert read("c", [f"c{i}" for i in range(6)])[0] == "whole:c0"
    assert read("c", [f"c{i}" for i in range(7)])[0] == "whole:c0"
