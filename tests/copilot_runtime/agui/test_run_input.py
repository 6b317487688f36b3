"""``RunAgentInput``: validation issues, and conversion into the engine's ``TurnRequest``."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from copilot_runtime.agui import echo, run_input
from copilot_runtime.agui.echo import echoed_input
from copilot_runtime.agui.run_input import (
    InvalidRunInput,
    RunInput,
    agui_history,
    input_messages_from_agui,
    run_input_parse,
    turn_request_from_run_input,
    without_system_messages,
)
from copilot_runtime.events.request import InputMessage
from copilot_runtime.history import HISTORIES, HistoryCache
from tests.support.history_forms import count_resumes


def body(**overrides: Any) -> dict[str, Any]:
    return {
        "threadId": "t-1",
        "runId": "3535bc51-1d2c-4364-9bb5-a1abd07a8837",
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "state": {},
        "messages": [{"id": "u1", "role": "user", "content": "Hi"}],
        **overrides,
    }


def parse(raw: Any) -> RunInput:
    """The input parsed as a request's is: its history entering first (copilot_runtime/history:
    the thread's earlier requests' messages known)."""
    return run_input_parse(raw, agui_history(raw, None))


def issue_paths(raw: Any) -> list[list[Any]]:
    with pytest.raises(InvalidRunInput) as invalid:
        parse(raw)
    details = orjson.loads(str(invalid.value))
    assert all("message" in issue for issue in details)
    return [issue["path"] for issue in details]


def test_the_real_clients_input_is_valid() -> None:
    parsed = run_input_parse(body())
    assert parsed.thread_id == "t-1"
    assert parsed.run_id == "3535bc51-1d2c-4364-9bb5-a1abd07a8837"
    assert parsed.raw == body()


def test_required_fields_are_reported_together() -> None:
    assert issue_paths({}) == [["threadId"], ["runId"], ["messages"], ["tools"], ["context"]]
    assert issue_paths([]) == [[]]


def test_messages_are_checked_by_role() -> None:
    paths = issue_paths(
        body(
            messages=[
                {"id": "a", "role": "wizard", "content": "x"},
                {"id": "b", "role": "tool", "content": "x"},
                {"id": "c", "role": "system"},
                {
                    "id": "d",
                    "role": "assistant",
                    "toolCalls": [{"id": "c1", "type": "other", "function": {"name": "f"}}],
                },
                {"role": "user", "content": 5},
            ]
        )
    )
    assert paths == [
        ["messages", 0, "role"],
        ["messages", 1, "toolCallId"],
        ["messages", 2, "content"],
        ["messages", 3, "toolCalls", 0, "type"],
        ["messages", 3, "toolCalls", 0, "function", "arguments"],
        ["messages", 4, "id"],
        ["messages", 4, "content"],
    ]


def test_tools_and_context_entries_are_checked() -> None:
    paths = issue_paths(body(tools=[{"name": "f"}], context=[{"value": "v"}]))
    assert paths == [["tools", 0, "description"], ["context", 0, "description"]]


@pytest.mark.parametrize("run_id", ["", "a" * 65, "has space", "-leading", "x/y"])
def test_run_ids_must_be_short_and_plain(run_id: str) -> None:
    assert issue_paths(body(runId=run_id)) == [["runId"]]


def test_thread_ids_are_bounded() -> None:
    assert issue_paths(body(threadId="")) == [["threadId"]]
    assert issue_paths(body(threadId="t" * 256)) == [["threadId"]]


def test_history_becomes_one_row_per_message_call_and_result() -> None:
    rows = input_messages_from_agui(
        [
            {"id": "s1", "role": "system", "content": "Be brief"},
            {"id": "u1", "role": "user", "content": "Greet Bob"},
            {
                "id": "a1",
                "role": "assistant",
                "content": "Sure",
                "toolCalls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "sayHello", "arguments": '{"name": "Bob"}'},
                    }
                ],
            },
            {"id": "r1", "role": "tool", "content": "greeted", "toolCallId": "c1"},
            {"id": "a2", "role": "assistant", "toolCalls": []},
            {"id": "x1", "role": "activity", "activityType": "t", "content": {}},
        ]
    )
    assert [(r.id, r.kind, r.role) for r in rows] == [
        ("s1", "text", "system"),
        ("u1", "text", "user"),
        ("a1", "text", "assistant"),
        ("c1", "action_execution", "assistant"),
        ("r1", "result", "tool"),
    ]
    call, result = rows[3], rows[4]
    assert call.action_name == "sayHello"
    assert call.arguments == {"name": "Bob"}
    assert call.parent_message_id == "a1"
    assert result.action_execution_id == "c1"
    assert result.action_name == "sayHello"
    assert result.result == "greeted"


def test_multimodal_user_content_keeps_text_and_inline_images() -> None:
    rows = input_messages_from_agui(
        [
            {
                "id": "u1",
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {
                        "type": "image",
                        "source": {"type": "data", "value": "AAA", "mimeType": "image/png"},
                    },
                ],
            }
        ]
    )
    assert [(r.kind, r.content, r.image_format, r.image_bytes) for r in rows] == [
        ("text", "What is this?", "", ""),
        ("image", "", "png", "AAA"),
    ]


def test_the_turn_request_carries_tools_context_props_and_state() -> None:
    parsed = run_input_parse(
        body(
            tools=[
                {
                    "name": "sayHello",
                    "description": "Say hello",
                    "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
                }
            ],
            context=[{"description": "User name", "value": "Alice"}],
            forwardedProps={
                "userId": "u1",
                "toolChoice": {"type": "function", "function": {"name": "sayHello"}},
                "temperature": 0.2,
            },
            state={"counter": 1},
            parentRunId="prev",
        )
    )
    request = turn_request_from_run_input(parsed, agent_name="default", frontend_url="http://x/")
    assert request.thread_id == "t-1"
    assert request.agent_name == "default"
    assert [(a.name, a.description, a.parameters["type"]) for a in request.actions] == [
        ("sayHello", "Say hello", "object")
    ]
    assert request.context == [("User name", "Alice")]
    assert request.properties["userId"] == "u1"
    assert request.forwarded.tool_choice == "function"
    assert request.forwarded.tool_choice_function_name == "sayHello"
    assert request.forwarded.temperature == 0.2
    assert request.agent_states == [{"agentName": "default", "state": '{"counter":1}'}]
    assert request.previous_run_id == "prev"
    assert request.frontend_url == "http://x/"


@pytest.mark.parametrize(
    ("overrides", "response"),
    [
        ({"forwardedProps": {"command": {"resume": "yes"}}}, "yes"),
        ({"forwardedProps": {"command": {"resume": {"approved": True}}}}, '{"approved":true}'),
        (
            {
                "resume": [{"interruptId": "i-1", "payload": "from-resume"}],
                "forwardedProps": {"command": {"resume": "legacy"}},
            },
            "from-resume",
        ),
    ],
)
def test_an_interrupt_answer_becomes_the_requests_meta_event(
    overrides: dict[str, Any], response: str
) -> None:
    request = turn_request_from_run_input(run_input_parse(body(**overrides)), agent_name="lg")
    assert request.meta_events == [
        {"name": "LangGraphInterruptEvent", "value": "", "response": response}
    ]


def test_no_answer_means_no_meta_event() -> None:
    request = turn_request_from_run_input(run_input_parse(body()), agent_name="lg")
    assert request.meta_events == []


def test_a_remembered_message_sent_again_with_bad_content_is_still_refused() -> None:
    """The history comes back every turn and a message that passed is not checked again;
    the same id with other content is."""
    good = {"id": "re-1", "role": "tool", "toolCallId": "c-1", "content": "ok"}
    parse(body(messages=[good]))
    parse(body(messages=[dict(good)]))  # known

    assert issue_paths(body(messages=[{**good, "content": 5}])) == [["messages", 0, "content"]]


def test_a_re_sent_message_converts_to_what_it_says_now() -> None:
    def rows(message: dict[str, Any]) -> list[InputMessage]:
        return turn_request_from_run_input(parse(body(messages=[message])), agent_name="a").messages

    first = {"id": "re-2", "role": "user", "content": "first words"}
    [before] = rows(first)
    [same] = rows(dict(first))
    [edited] = rows({**first, "content": "edited"})

    assert same is before  # made once, while it was checked
    assert (before.content, edited.content) == ("first words", "edited")


def test_a_history_is_converted_alike_with_and_without_the_rows_made_while_checking() -> None:
    call = {"id": "call-4", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    messages = [
        {"id": "sys-4", "role": "system", "content": "Be brief"},
        {"id": "u-4", "role": "user", "content": "hi"},
        {"id": "a-4", "role": "assistant", "content": "calling", "toolCalls": [call]},
        {"id": "t-4", "role": "tool", "toolCallId": "call-4", "content": "done"},
    ]
    run_input = run_input_parse(body(messages=messages))

    assert run_input.own_rows is not None
    assert [rows is None for rows in run_input.own_rows] == [False, False, False, True]
    assert input_messages_from_agui(messages, run_input.own_rows) == input_messages_from_agui(
        messages
    )


def _rows(messages: list[dict[str, Any]]) -> list[InputMessage]:
    """A request carrying ``messages`` on the thread, parsed and converted."""
    return turn_request_from_run_input(parse(body(messages=messages)), agent_name="a").messages


def test_a_tool_result_names_its_call_even_when_the_call_was_known() -> None:
    call = {
        "id": "a-3",
        "role": "assistant",
        "toolCalls": [
            {"id": "call-3", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        ],
    }
    result = {"id": "r-3", "role": "tool", "toolCallId": "call-3", "content": "found"}
    _rows([call])

    rows = _rows([dict(call), dict(result)])  # parsed anew from the next request

    assert [(row.kind, row.action_name) for row in rows] == [
        ("action_execution", "lookup"),
        ("result", "lookup"),
    ]


def test_a_history_coming_back_reuses_its_rows_and_its_calls_names() -> None:
    # The client re-sends the history (read from its bytes as the same objects, or parsed
    # anew and equal): the earlier messages' rows are not made again, and a new tool result
    # still names a known call.
    call = {"id": "call-5", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    history = [
        {"id": "u-5", "role": "user", "content": "find it"},
        {"id": "a-5", "role": "assistant", "content": "looking", "toolCalls": [call]},
    ]
    first = _rows(history)

    longer = [*history, {"id": "t-5", "role": "tool", "toolCallId": "call-5", "content": "here"}]
    second = _rows(longer)
    third = _rows([dict(m) for m in longer])

    assert second == input_messages_from_agui([dict(m) for m in longer])  # made anew
    assert all(a is b for a, b in zip(first, second[:3], strict=True))
    assert all(a is b for a, b in zip(second, third, strict=True))
    assert (second[3].kind, second[3].action_name) == ("result", "lookup")


def test_without_its_history_a_request_s_rows_are_made_anew() -> None:
    history = [{"id": "u-6", "role": "user", "content": "hi"}]
    first = _rows(history)

    again = input_messages_from_agui(history)

    assert again == first and again[0] is not first[0]


def test_rows_without_an_id_are_never_shared() -> None:
    # The store gives such a row an id of its own when it writes it.
    call = {"id": "", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    history = [{"id": "a-7", "role": "assistant", "toolCalls": [call]}]
    first = _rows(history)

    second = _rows(history)

    assert second == first and second[0] is not first[0]


def test_the_echo_keeps_what_is_new_to_the_thread_and_what_it_does_not_store() -> None:
    call = {"id": "call-9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"id": "sys", "role": "system", "content": "Be brief"},
        {"id": "u-old", "role": "user", "content": "Hi"},
        {"id": "a-old", "role": "assistant", "content": "Hello"},
        {"id": "a-empty", "role": "assistant", "content": ""},
        {"id": "a-calls", "role": "assistant", "content": "", "toolCalls": [call]},
        {"id": "t-old", "role": "tool", "toolCallId": "call-8", "content": "x"},
        {"id": "t-new", "role": "tool", "toolCallId": "call-9", "content": "y"},
        {"id": "u-new", "role": "user", "content": "And now?"},
    ]
    raw = body(messages=messages)

    echoed = echoed_input(raw, ["call-9", "t-new", "u-new"])

    assert [m["id"] for m in echoed["messages"]] == ["sys", "a-empty", "a-calls", "t-new", "u-new"]
    assert echoed_input(raw, [m["id"] for m in messages] + ["call-9"]) is raw


def test_a_new_tool_result_brings_the_call_only_message_that_made_its_call() -> None:
    def calls(*ids: str) -> list[dict[str, Any]]:
        return [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ]

    messages = [
        {"id": "u1", "role": "user", "content": "Hi"},
        {"id": "a-calls", "role": "assistant", "toolCalls": calls("c1", "c2")},
        {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "x"},
        {"id": "t2", "role": "tool", "toolCallId": "c2", "content": "y"},
        {"id": "a-text", "role": "assistant", "content": "Let me", "toolCalls": calls("c3")},
        {"id": "t3", "role": "tool", "toolCallId": "c3", "content": "z"},
        {"id": "t-lost", "role": "tool", "toolCallId": "c-unknown", "content": "?"},
    ]
    raw = body(messages=messages)

    # The follow-up of a frontend tool call: the results are new, the calls stored already.
    follow_up = echoed_input(raw, ["t1", "t2"])
    assert [m["id"] for m in follow_up["messages"]] == ["a-calls", "t1", "t2"]
    # A message with text was known by its text's id: its result comes alone, as from TS.
    assert [m["id"] for m in echoed_input(raw, ["t3", "t-lost"])["messages"]] == ["t3", "t-lost"]
    # The turn after: the results are stored too, and nothing of it is echoed again.
    assert echoed_input(raw, [])["messages"] == []


def _grown(rng: random.Random, messages: list[dict[str, Any]], count: int) -> list[str]:
    """``count`` more messages of every role and shape the echo tells apart; the ids the
    thread would store for them."""
    stored: list[str] = []
    for _ in range(count):
        n = len(messages)
        choice = rng.randrange(7)
        if choice == 0:
            message = {"id": f"u{n}", "role": "user", "content": "q"}
        elif choice == 1:
            message = {"id": f"a{n}", "role": "assistant", "content": rng.choice(["", "a"])}
        elif choice == 2:
            calls = [
                {"id": f"c{n}-{k}", "type": "function", "function": {"name": "f", "arguments": ""}}
                for k in range(rng.randrange(1, 3))
            ]
            message = {"id": f"a{n}", "role": "assistant", "content": "", "toolCalls": calls}
        elif choice == 3:
            message = {"id": f"t{n}", "role": "tool", "toolCallId": f"c{n - 1}-0", "content": "r"}
        elif choice == 4:
            message = {"id": f"s{n}", "role": rng.choice(["system", "developer"]), "content": "s"}
        elif choice == 5:
            message = {"id": f"x{n}", "role": "activity", "activityType": "a", "content": {}}
        else:
            # An id used before (a client repeating itself): never kept for the next turn.
            message = {"id": rng.choice(messages)["id"] if messages else "u0", "role": "user"}
            message["content"] = "again"
        messages.append(message)
        stored.extend(echo._stored_ids(message))
    return stored


def test_the_echo_of_a_growing_history_is_the_one_made_from_scratch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resumed = count_resumes(monkeypatch, echo._ECHOES)
    expected: list[bool] = []
    for seed in range(60):
        rng = random.Random(seed)
        HISTORIES.clear()  # each seed's ids are the others' too: a process of its own
        messages: list[dict[str, Any]] = []
        stored: list[str] = []
        kept = False
        for _turn in range(10):
            # Resumed once an earlier turn's history named no stored row twice (kept then).
            expected.append(kept)
            added = _grown(rng, messages, rng.randrange(1, 4))
            stored += added
            kept = kept or len(set(stored)) == len(stored)
            # New to the thread: mostly this turn's messages, sometimes earlier ones too (a
            # message stored again after a failed turn, or after it was superseded).
            earlier = rng.sample(stored, min(2, len(stored)))
            new = added + [i for i in earlier if rng.random() < 0.3]
            raw = body(threadId=f"echo-{seed}", messages=list(messages))
            echoed = echoed_input(raw, new, agui_history(raw, None))
            from_scratch = echoed_input(raw, new)
            assert echoed == from_scratch, seed
            assert (echoed is raw) == (from_scratch is raw)
    assert [done > 0 for done in resumed] == expected
    assert expected.count(True) > 300
    # Not only the first turns': the echo is decided from the history's ids all along.
    assert max(resumed) > 20


def test_a_history_with_an_id_used_twice_is_decided_whole_the_next_time() -> None:
    messages = [
        {"id": "d-1", "role": "user", "content": "hi"},
        {"id": "d-1", "role": "user", "content": "hi again"},
    ]
    raw = body(messages=messages)
    history = agui_history(raw, None)
    echoed_input(raw, ["d-1"], history)
    assert history is not None and history.resume(echo._ECHOES, messages) == (0, None)
    unique = [{"id": "e-1", "role": "user", "content": "hi"}]
    raw = body(messages=unique)
    history = agui_history(raw, None)
    echoed_input(raw, ["e-1"], history)
    assert history is not None and history.resume(echo._ECHOES, unique)[0] == 1


def _history(thread: str, count: int) -> list[dict[str, Any]]:
    return [
        {"id": f"{thread}-{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"}
        for i in range(count)
    ]


def test_a_re_sent_history_is_recognised_together_with_the_rows_made_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The history comes back whole with each turn: the part known before is recognised as
    one list, and only the new messages are checked one by one."""
    earlier = parse(body(messages=_history("whole", 3))).own_rows
    assert earlier is not None
    checked: list[Any] = []
    check = run_input._Checker.message

    def counting(self: Any, raw: Any, index: int) -> None:
        checked.append(raw["id"])
        check(self, raw, index)

    monkeypatch.setattr(run_input._Checker, "message", counting)
    again = parse(body(messages=_history("whole", 5)))  # parsed anew: equal messages

    assert checked == ["whole-3", "whole-4"]
    assert again.own_rows is not None
    assert all(a is b for a, b in zip(again.own_rows[:3], earlier, strict=True))
    rows = turn_request_from_run_input(again, agent_name="a").messages
    assert [(row.role, row.content) for row in rows] == [
        ("user", "m0"),
        ("assistant", "m1"),
        ("user", "m2"),
        ("assistant", "m3"),
        ("user", "m4"),
    ]


def test_a_changed_message_in_a_re_sent_history_is_checked_and_converted_again() -> None:
    parse(body(messages=_history("edit", 3)))

    bad = _history("edit", 4)
    bad[1]["role"] = "narrator"
    assert issue_paths(body(messages=bad)) == [["messages", 1, "role"]]

    edited = _history("edit", 4)
    edited[1]["content"] = "edited"
    rows = turn_request_from_run_input(parse(body(messages=edited)), agent_name="a").messages
    assert [row.content for row in rows] == ["m0", "edited", "m2", "m3"]


def test_a_history_with_an_issue_is_not_kept_whole() -> None:
    """A request refused for one of its messages leaves nothing recognisable together: the
    messages it refused are checked again when they come back."""
    bad = _history("refused", 3)
    bad[2]["role"] = "narrator"
    assert issue_paths(body(messages=bad)) == [["messages", 2, "role"]]
    assert issue_paths(body(messages=[*bad, *_history("later", 1)])) == [["messages", 2, "role"]]


def test_a_growing_history_loses_its_system_messages_as_a_fresh_one_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resumed = count_resumes(monkeypatch, run_input._WITHOUT_SYSTEM)
    rng = random.Random(7)
    kinds = [("text", "user"), ("text", "assistant"), ("text", "system"), ("text", "developer")]
    kinds.append(("action_execution", ""))
    cache = HistoryCache()
    history: list[InputMessage] = []
    for turn in range(15):
        for n in range(3):
            kind, role = rng.choice(kinds)
            history = [*history, InputMessage(id=f"w-{turn}-{n}", kind=kind, role=role)]
        known = cache.enter("test", history, thread=(None, "t"))
        kept = without_system_messages(history, known)
        fresh = without_system_messages(history)
        assert [id(m) for m in kept] == [id(m) for m in fresh]
        assert all(m.role not in ("system", "developer") for m in kept)
        kept.append(history[0])  # the caller's list is its own: nothing kept changes
        assert resumed[-1] == (len(history) - 3 if turn else 0)
