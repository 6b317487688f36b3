"""Building the model request from the thread's messages."""

from __future__ import annotations

from copilot_runtime.engine.model_messages import model_messages
from copilot_runtime.events.request import InputMessage


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
