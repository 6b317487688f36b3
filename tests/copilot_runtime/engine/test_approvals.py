"""Which approval decisions a turn applies: the client's one answer to a call of the last
assistant turn, to an action needing approval, and nothing once the user moved on."""

from __future__ import annotations

from typing import Any, SupportsIndex

import pytest

from copilot_runtime.engine.actions import ServerAction
from copilot_runtime.engine.approvals import decisions_to_apply


def _action(name: str, *, needs_approval: bool) -> ServerAction:
    return ServerAction(
        name=name,
        description="",
        parameters={"type": "object", "properties": {}},
        handler=lambda: "done",
        needs_approval=needs_approval,
    )


def _call(call_id: str, name: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _history(turns: int) -> list[dict[str, Any]]:
    """A long text-only conversation before the turn that matters."""
    return [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n}"}
        for n in range(turns)
    ]


ACTIONS = {
    "delete_all": _action("delete_all", needs_approval=True),
    "lookup": _action("lookup", needs_approval=False),
}
ASKED = {
    "role": "assistant",
    "content": None,
    "tool_calls": [_call("c1", "delete_all"), _call("c2", "lookup")],
}


def test_the_clients_answer_to_a_guarded_call_is_applied() -> None:
    conversation = [
        *_history(4),
        ASKED,
        {"role": "tool", "tool_call_id": "c1", "content": '{"approved": true}'},
        {"role": "tool", "tool_call_id": "c2", "content": "found"},
    ]

    [decision] = decisions_to_apply(conversation, ACTIONS)

    assert (decision.call_id, decision.action.name, decision.decision.approved) == (
        "c1",
        "delete_all",
        True,
    )


@pytest.mark.parametrize(
    "after",
    [
        [{"role": "user", "content": "never mind"}],
        [],  # no answer yet
        [  # answered twice: the action's own result followed the decision; already run
            {"role": "tool", "tool_call_id": "c1", "content": '{"approved": true}'},
            {"role": "tool", "tool_call_id": "c1", "content": "deleted"},
        ],
    ],
    ids=["the user moved on", "no answer", "already executed"],
)
def test_nothing_is_applied_without_one_pending_answer(after: list[dict[str, Any]]) -> None:
    answer = {"role": "tool", "tool_call_id": "c1", "content": '{"approved": true}'}
    conversation = [*_history(4), ASKED, *after]
    if after and after[0]["role"] == "user":
        conversation.insert(5, answer)  # answered, then the user wrote on

    assert decisions_to_apply(conversation, ACTIONS) == []


def test_nothing_is_applied_when_no_action_needs_approval() -> None:
    conversation = [
        ASKED,
        {"role": "tool", "tool_call_id": "c1", "content": '{"approved": true}'},
    ]

    unguarded = {"delete_all": _action("delete_all", needs_approval=False)}

    assert decisions_to_apply(conversation, unguarded) == []


class _OnlyTheEnd(list[dict[str, Any]]):
    """A conversation that fails a read of any message before ``first_readable``."""

    first_readable = 0

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, SupportsIndex) and index.__index__() < self.first_readable:
            raise AssertionError(f"message {index.__index__()} of the thread was read")
        return super().__getitem__(index)

    def __iter__(self) -> Any:
        raise AssertionError("the whole thread was walked")


@pytest.mark.parametrize(
    "end",
    [
        [{"role": "user", "content": "next question"}],
        [ASKED, {"role": "tool", "tool_call_id": "c1", "content": '{"approved": false}'}],
    ],
    ids=["a user message", "an answered call"],
)
def test_only_the_end_of_a_long_thread_is_read(end: list[dict[str, Any]]) -> None:
    # A turn's cost must not grow with the thread: the look-back stops at the last user
    # message or the last assistant turn with calls.
    conversation = _OnlyTheEnd([*_history(240), *end])
    conversation.first_readable = 240

    pending = decisions_to_apply(conversation, ACTIONS)

    assert [d.decision.approved for d in pending] == ([] if len(end) == 1 else [False])
