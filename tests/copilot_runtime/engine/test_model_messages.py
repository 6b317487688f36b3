"""Building the model request from the thread's messages."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from copilot_runtime.engine.model_messages import _FOLDED, _Fold, model_messages
from copilot_runtime.events.request import InputMessage
from copilot_runtime.history import HistoryCache, KnownHistory
from tests.support.history_forms import count_resumes


def _text(message_id: str, role: str, content: str) -> InputMessage:
    return InputMessage(id=message_id, kind="text", role=role, content=content)


def _call(call_id: str, parent: str, name: str = "f") -> InputMessage:
    return InputMessage(
        id=call_id,
        kind="action_execution",
        role="assistant",
        action_name=name,
        arguments={"x": 1},
        parent_message_id=parent,
    )


def _result(call_id: str, result: str = "ok") -> InputMessage:
    return InputMessage(
        id=f"result-{call_id}",
        kind="result",
        role="tool",
        action_execution_id=call_id,
        action_name="f",
        result=result,
    )


def test_tool_calls_fold_into_their_assistant_message() -> None:
    out = model_messages(
        [
            _text("u", "user", "hi"),
            _text("a", "assistant", "let me"),
            _call("c1", "a"),
            _result("c1"),
        ],
        [],
    )
    assert out[1]["role"] == "assistant"
    assert out[1]["content"] == "let me"
    assert out[1]["tool_calls"][0]["id"] == "c1"
    assert out[1]["tool_calls"][0]["function"]["arguments"] == '{"x":1}'
    assert out[2] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}


def test_results_without_a_call_are_dropped_and_a_repeated_result_is_sent_once() -> None:
    out = model_messages(
        [
            _text("u", "user", "hi"),
            _call("c1", "p"),
            _result("c1", "first"),
            _result("c1", "again"),
            _result("ghost"),
        ],
        [],
    )
    tool_messages = [m for m in out if m["role"] == "tool"]
    # Once, with the latest content (an approved action's result follows the decision).
    assert tool_messages == [{"role": "tool", "tool_call_id": "c1", "content": "again"}]


def test_calls_without_results_are_not_sent() -> None:
    out = model_messages([_text("u", "user", "hi"), _call("c1", "p")], [])
    assert all("tool_calls" not in m for m in out)


def test_context_reaches_the_model_as_one_system_message() -> None:
    out = model_messages([_text("u", "user", "hi")], [("The user", "Alice"), ("Plan", "pro")])
    assert out[0]["role"] == "system"
    assert "The user: Alice" in out[0]["content"]
    assert "Plan: pro" in out[0]["content"]
    assert out[1] == {"role": "user", "content": "hi"}


def test_images_become_image_url_parts() -> None:
    image = InputMessage(id="i", kind="image", role="user", image_format="png", image_bytes="AAA")
    out = model_messages([image], [])
    assert out[0]["content"][0]["image_url"]["url"] == "data:image/png;base64,AAA"


# --- a history re-sent with the next turn ------------------------------------------------------


def _image(message_id: str) -> InputMessage:
    return InputMessage(
        id=message_id, kind="image", role="user", image_format="png", image_bytes="AA"
    )


def _grow(rng: random.Random, history: list[InputMessage], count: int) -> None:
    """``count`` more messages of every kind the conversion folds: texts, tool calls under
    their assistant message, under none or under an unknown one, results (some repeated, some
    for no call), images, instructions in the middle."""
    for _ in range(count):
        n = len(history)
        calls = [m.id for m in history if m.kind == "action_execution"]
        assistants = [m.id for m in history if m.kind == "text" and m.role == "assistant"]
        choice = rng.randrange(9)
        if choice == 0:
            history.append(_text(f"u{n}", "user", f"question {n}"))
        elif choice == 1:
            history.append(_text(f"a{n}", "assistant", f"answer {n}"))
        elif choice == 2 and assistants:
            history.append(_call(f"c{n}", rng.choice(assistants)))  # under an earlier message
        elif choice == 3:
            history.append(_call(f"c{n}", ""))  # under the last assistant message, or a new one
        elif choice == 4:
            history.append(_call(f"c{n}", f"unknown{n}"))
        elif choice == 5 and calls:
            history.append(_result(rng.choice(calls), f"result {n}"))  # repeated ones win
        elif choice == 6:
            history.append(_result(f"none{n}"))  # no such call: dropped
        elif choice == 7:
            history.append(_image(f"i{n}"))
        else:
            history.append(_text(f"s{n}", "system", f"note {n}"))


def _from_scratch(history: list[InputMessage]) -> list[dict[str, Any]]:
    """The conversion of ``history`` with nothing known of earlier turns (and nothing kept of
    this one)."""
    return model_messages(history, [("page", "home")])


def _entered(cache: HistoryCache, messages: list[InputMessage]) -> KnownHistory:
    """The history of a request carrying ``messages``, entering as the thread's next one."""
    return cache.enter("test", list(messages), thread=(None, "t"))


def test_a_growing_history_converts_as_a_fresh_one_at_every_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resumed = count_resumes(monkeypatch, _FOLDED)
    expected_resumes: list[bool] = []
    for seed in range(40):
        rng = random.Random(seed)
        cache = HistoryCache()
        history = [_text(f"instructions-{seed}", "system", "be brief")]
        past_instructions = False
        earlier: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
        for turn in range(12):
            # v1's instructions come first under a fresh id every request.
            history[0] = _text(f"instructions-{seed}-{turn}", "system", "be brief")
            _grow(rng, history, rng.randrange(1, 5))
            expected_resumes.append(past_instructions)
            past_instructions = any(m.role != "system" for m in history)
            known = _entered(cache, history)
            out = model_messages(known.raws, [("page", "home")], known)
            assert out == _from_scratch(history), seed
            earlier.append((out, copy.deepcopy(out)))
            out.append({"role": "user", "content": "added by the caller"})
        # No later turn changed what an earlier one returned (entries are copied before a
        # later message completes them).
        for returned, as_returned in earlier:
            assert returned[:-1] == as_returned
    # Every turn resumed after the messages of the one before, once there were any past the
    # leading instructions.
    assert [done > 0 for done in resumed] == expected_resumes


def test_a_re_sent_history_converts_only_its_new_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    added: list[str] = []
    add = _Fold.add

    def counting(self: _Fold, message: InputMessage) -> None:
        added.append(message.id)
        add(self, message)

    monkeypatch.setattr(_Fold, "add", counting)
    cache = HistoryCache()
    history = [_text("r-u0", "user", "hi"), _text("r-a0", "assistant", "hello")]
    for n in range(1, 60):
        history += [_text(f"r-u{n}", "user", "more"), _text(f"r-a{n}", "assistant", "sure")]
    first = _entered(cache, [_text("instructions-1", "system", "x"), *history])
    model_messages(first.raws, [], first)
    added.clear()
    history += [
        _text("r-u-new", "user", "and?"),
        _call("r-c-new", "r-a59"),
        _result("r-c-new"),
    ]
    # The next request: v1's instructions under a fresh id, the history, its new messages.
    second = _entered(cache, [_text("instructions-2", "system", "x"), *history])
    out = model_messages(second.raws, [], second)
    assert added == ["r-u-new", "r-c-new", "result-r-c-new"]
    assert out[-2:] == [
        {"role": "user", "content": "and?"},
        {"role": "tool", "tool_call_id": "r-c-new", "content": "ok"},
    ]
    # The call under an earlier message went into a copy of that message's entry.
    calls = out[-3]["tool_calls"]
    assert isinstance(calls, list) and [call["id"] for call in calls] == ["r-c-new"]
    added.clear()
    again = _entered(cache, second.raws)
    model_messages(again.raws, [], again)
    assert added == []


def test_a_history_with_a_message_without_id_is_converted_whole_next_time() -> None:
    cache = HistoryCache()
    history = [_text("w-u0", "user", "hi"), _text("", "assistant", "no id yet")]
    first = _entered(cache, history)
    model_messages(first.raws, [], first)
    history[1].id = "w-stored"  # named when stored
    history.append(_text("w-u1", "user", "again"))
    second = _entered(cache, history)
    done, _kept = second.resume(_FOLDED, second.raws)
    assert done == 0
