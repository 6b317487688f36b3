"""``check_turn_request``: what the store could not keep is refused, naming the field."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from copilot_runtime.events.request import (
    BadTurnRequest,
    InputMessage,
    TurnRequest,
    check_turn_request,
    parse_datetime,
)


def history(**changed: Any) -> TurnRequest:
    messages = [
        InputMessage(id="u1", kind="text", role="user", content="Hi"),
        InputMessage(
            id="a1", kind="text", role="assistant", content="Hello", parent_message_id="u1"
        ),
        InputMessage(
            id="call-1",
            kind="action_execution",
            action_name="lookup",
            arguments={"q": "x"},
            parent_message_id="a1",
        ),
        InputMessage(
            id="r1", kind="result", action_execution_id="call-1", action_name="lookup", result="ok"
        ),
    ]
    for field, value in changed.items():
        setattr(messages[3], field, value)
    return TurnRequest(thread_id="t-1", messages=messages)


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_a_clean_history_passes() -> None:
    check_turn_request(history())


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("id", "x" * 256, "messages[3].id is longer than 255 characters."),
        ("parent_message_id", "p\x00", "messages[3].parentMessageId contains a NUL character"),
        ("action_execution_id", "y" * 300, "messages[3].actionExecutionId is longer than 255"),
        ("action_name", "n\x00", "messages[3] name contains a NUL character"),
        ("role", "r" * 17, "messages[3].role is longer than 16 characters."),
        ("content", "text\x00", "messages[3].content contains a NUL character"),
        ("result", "\x00", "messages[3].result contains a NUL character"),
        ("arguments", nested(300), "messages[3].arguments is nested too deeply"),
        ("agent_state", nested(300), "messages[3].state is nested too deeply"),
    ],
)
def test_a_message_the_store_cannot_keep_is_refused_by_its_field(
    field: str, value: Any, said: str
) -> None:
    with pytest.raises(BadTurnRequest) as refused:
        check_turn_request(history(**{field: value}))

    assert said in refused.value.message


def test_a_message_that_passed_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # A remembered history message is the same object in every request that re-sends it.
    from copilot_runtime.events import request as request_module

    looked_at: list[str] = []
    quick_test = request_module._message_suspect

    def counted(message: InputMessage) -> bool:
        looked_at.append(message.id)
        return quick_test(message)

    monkeypatch.setattr(request_module, "_message_suspect", counted)
    first = history()
    check_turn_request(first)
    again = TurnRequest(
        thread_id="t-1",
        messages=[*first.messages, InputMessage(id="u2", kind="text", role="user", content="?")],
    )
    check_turn_request(again)

    assert looked_at == ["u1", "a1", "call-1", "r1", "u2"]


def test_a_refused_message_is_refused_again() -> None:
    refused = history(content="text\x00")
    for _ in range(2):
        with pytest.raises(BadTurnRequest):
            check_turn_request(refused)
    assert not refused.messages[3].checked


def test_whether_a_message_was_checked_is_no_part_of_it() -> None:
    from copilot_runtime.events.request import turn_request_to_payload

    checked = history()
    check_turn_request(checked)

    assert checked.messages == history().messages
    assert "checked" not in turn_request_to_payload(checked)["messages"][0]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2026-11-25T10:00:00.123Z", dt.datetime(2026, 11, 25, 10, 0, 0, 123000, tzinfo=dt.UTC)),
        (
            "2026-11-25T12:00:00+02:00",
            dt.datetime(2026, 11, 25, 10, 0, 0, tzinfo=dt.UTC),
        ),
        ("yesterday", None),
        ("", None),
        (None, None),
        (1764064800, None),
    ],
)
def test_a_message_s_created_at_is_read_or_dropped(raw: Any, expected: Any) -> None:
    assert parse_datetime(raw) == expected
