"""``read_body``: a re-sent history is read from its bytes once, and what a body means never
depends on what is known (copilot_runtime/history/body.py)."""

from __future__ import annotations

import random
import uuid
from typing import Any

import orjson
import pytest

from copilot_runtime.history import V1, V2, HistoryCache, read_body
from copilot_runtime.history import body as body_module


def message(n: int, role: str = "user") -> dict[str, Any]:
    return {
        "id": str(uuid.UUID(int=n)),
        "createdAt": "2026-11-26T17:00:00.000Z",
        "textMessage": {"content": f'turn {n}: "quoted"\nnext line é', "role": role},
    }


def v1_body(messages: list[dict[str, Any]], **extra: Any) -> bytes:
    data = {"frontend": {"actions": []}, "messages": messages, "threadId": "t-1", **extra}
    return orjson.dumps(
        {
            "operationName": "generateCopilotResponse",
            "query": "mutation {}",
            "variables": {"data": data},
        }
    )


def v2_body(messages: list[dict[str, Any]], **extra: Any) -> bytes:
    return orjson.dumps(
        {"threadId": "t-1", "runId": "r", "state": {}, **extra, "messages": messages}
    )


def held(value: dict[str, Any], route: str) -> list[Any]:
    return value["variables"]["data"]["messages"] if route == "graphql" else value["messages"]


BODIES = {V1: v1_body, V2: v2_body}


class Resent:
    """A process's front door and protocol surface: each body read (``read_body``), then its
    history entered (``HistoryCache.enter``), as a request's is."""

    def __init__(self, size: int = 1000) -> None:
        self.cache = HistoryCache(size)

    def json_object(self, route: str, body: bytes) -> dict[str, Any] | None:
        read = read_body(route, body, self.cache)
        if read is None:
            return None
        if read.raws is not None:
            self.cache.enter(route, read.raws, read=read)
        return read.value

    def __len__(self) -> int:
        return len(self.cache)


@pytest.fixture
def resent() -> Resent:
    return Resent()


@pytest.mark.parametrize("route", ["graphql", "agui"])
def test_a_resent_history_reads_as_the_body_says_with_the_messages_parsed_before(
    resent: Resent, route: str
) -> None:
    history = [message(1), message(2, "assistant")]
    first = resent.json_object(route, BODIES[route](history))
    assert first is not None

    longer = [*history, message(3)]
    body = BODIES[route](longer)
    second = resent.json_object(route, body)

    assert second == orjson.loads(body)
    earlier, later = held(first, route), held(second, route)
    assert all(a is b for a, b in zip(earlier, later[:2], strict=True))  # the same objects
    third = resent.json_object(route, BODIES[route]([*longer, message(4, "assistant")]))
    assert third is not None
    assert held(third, route)[2] is later[2]  # the new message is kept too


@pytest.mark.parametrize("route", ["graphql", "agui"])
def test_an_edited_earlier_message_is_read_from_the_body(resent: Resent, route: str) -> None:
    history = [message(1), message(2, "assistant"), message(3)]
    resent.json_object(route, BODIES[route](history))

    edited = [history[0], {**history[1], "textMessage": {"content": "other", "role": "assistant"}}]
    body = BODIES[route]([*edited, message(4)])
    value = resent.json_object(route, body)

    assert value == orjson.loads(body)
    assert held(value, route)[1]["textMessage"]["content"] == "other"


@pytest.mark.parametrize("route", ["graphql", "agui"])
def test_a_history_behind_fresh_instructions_reads_the_messages_parsed_before(
    resent: Resent, route: str
) -> None:
    # The v1 client sends its instructions first, under a fresh id in every request.
    def instructions(n: int) -> dict[str, Any]:
        return {"id": f"sys-{n}", "textMessage": {"content": "Be brief. " * 40, "role": "system"}}

    history = [message(1), message(2, "assistant")]
    first = resent.json_object(route, BODIES[route]([instructions(1), *history]))
    assert first is not None

    history.append(message(3))
    body = BODIES[route]([instructions(2), *history])
    second = resent.json_object(route, body)

    assert second == orjson.loads(body)
    earlier, later = held(first, route), held(second, route)
    assert all(a is b for a, b in zip(earlier[1:], later[1:3], strict=True))
    third = resent.json_object(route, BODIES[route]([instructions(3), *history, message(4)]))
    assert third is not None
    assert held(third, route)[3] is later[3]  # the second turn's new message, kept too
    assert len(resent) == 1  # each turn's entry in place of the one before


def test_the_same_bytes_under_another_messages_key_are_not_taken_for_the_history(
    resent: Resent,
) -> None:
    history = [message(1), message(2, "assistant")]
    resent.json_object("agui", v2_body(history))

    # The kept bytes come first inside the state; the history itself is another one.
    body = v2_body([message(7)], state={"messages": [*history, message(3)]})
    value = resent.json_object("agui", body)

    assert value == orjson.loads(body)
    assert value is not None and value["messages"] == [message(7)]


def test_a_body_carrying_the_placeholder_itself_means_what_it_says(
    resent: Resent,
) -> None:
    resent.json_object("agui", v2_body([message(1)]))
    body = v2_body([body_module._TOKEN, message(1)])  # a client cannot know it: tried anyway

    assert resent.json_object("agui", body) == orjson.loads(body)


def test_a_history_is_kept_per_route(resent: Resent) -> None:
    history = [message(1), message(2, "assistant")]
    resent.json_object("agui", v2_body(history))

    value = resent.json_object("graphql", v1_body([*history, message(3)]))

    assert value is not None
    assert held(value, "graphql")[0] == history[0]
    assert len(resent) == 2  # read whole, and kept for the v1 route as well


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not an object"),
        (b'{"messages": ' + b"[" * 300 + b"]" * 300 + b"}", "nested deeper than orjson writes"),
    ],
)
def test_what_is_not_a_writable_json_object_is_none(resent: Resent, body: bytes, why: str) -> None:
    assert resent.json_object("agui", body) is None, why


def test_a_resent_body_nested_too_deeply_is_none(resent: Resent) -> None:
    history = [message(1)]
    resent.json_object("agui", v2_body(history))
    body = v2_body([*history, {"id": "x", "deep": "DEEP"}])
    deep = body.replace(b'"DEEP"', b"[" * 300 + b"]" * 300)  # orjson would not write it

    assert resent.json_object("agui", deep) is None


def test_what_is_kept_is_bounded_by_the_remembered_messages(resent: Resent) -> None:
    small = Resent(size=5)
    for thread in range(4):
        small.json_object("agui", v2_body([message(100 * thread + n) for n in range(2)]))
    assert small.cache.messages <= 5

    nothing = Resent(size=0)
    nothing.json_object("agui", v2_body([message(1)]))
    assert len(nothing) == 0


def test_bodies_changed_at_random_read_as_orjson_reads_them(resent: Resent) -> None:
    # Threads continued, edited, truncated and re-sent in any order: whatever is kept, each
    # body reads exactly as a plain parse reads it.
    rng = random.Random(15)
    threads: list[list[dict[str, Any]]] = [[message(1000 * t)] for t in range(3)]
    for step in range(600):
        t = rng.randrange(len(threads))
        history = threads[t]
        change = rng.random()
        if change < 0.6:
            history = [*history, message(1000 * t + step + 1, rng.choice(["user", "assistant"]))]
        elif change < 0.75 and len(history) > 1:
            history = history[: rng.randrange(1, len(history))]
        elif change < 0.85:
            at = rng.randrange(len(history))
            history = [*history[:at], {**history[at], "createdAt": str(step)}, *history[at + 1 :]]
        elif change < 0.95:  # a first message under a fresh id, as v1's instructions are
            history = [{**history[0], "id": f"fresh-{step}"}, *history[1:]]
        threads[t] = history
        route = rng.choice(["graphql", "agui"])
        body = BODIES[route](history)

        assert resent.json_object(route, body) == orjson.loads(body), step


def test_a_short_history_is_recognised_too(resent: Resent) -> None:
    # The v2 client's first message may be a few dozen bytes: {"id":"u1","role":"user",...}.
    short = [{"id": "u1", "role": "user", "content": "Greet Bob"}]
    first = resent.json_object("agui", v2_body(short))
    assert first is not None

    second = resent.json_object("agui", v2_body([*short, {"id": "a1", "role": "assistant"}]))

    assert second is not None and second["messages"][0] is first["messages"][0]


def test_many_threads_continued_in_turn_are_each_recognised(resent: Resent) -> None:
    # The v1 client writes a message's keys in order: each thread's history starts with the
    # same bytes ({"createdAt":"<the same second>"...); its first id tells them apart.
    def sorted_message(thread: int, n: int) -> dict[str, Any]:
        return {
            "createdAt": "2026-11-26T17:00:00.000Z",
            "id": f"ck-{uuid.UUID(int=1000 * thread + n)}",
            "textMessage": {"content": f"turn {n}", "role": "user"},
        }

    histories = {thread: [sorted_message(thread, 0)] for thread in range(50)}
    previous: dict[int, list[Any]] = {}
    for turn in range(1, 4):
        for thread, history in histories.items():
            history.append(sorted_message(thread, turn))
            value = resent.json_object("graphql", v1_body(history))
            assert value is not None
            carried = held(value, "graphql")
            if thread in previous:
                assert all(a is b for a, b in zip(previous[thread], carried, strict=False))
            previous[thread] = carried
