"""The approval escape hatch: calls to actions that need approval are never executed by the loop.

The loop stops and returns such a call to the client (a frontend action call in v1, a tool call
in v2). The client's decision arrives as that call's tool result in the next request: the
engine then executes the action if it was approved, or tells the model it was rejected, and the
loop continues from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from copilot_runtime.engine.actions import ServerAction

_APPROVING_WORDS = frozenset(
    {"approve", "approved", "yes", "y", "ok", "true", "accept", "accepted"}
)


@dataclass(frozen=True)
class ApprovalDecision:
    approved: bool
    reason: str


def approval_decision(result: str) -> ApprovalDecision:
    """Read the client's answer: ``{"approved": bool, "reason"?}``, or a word like "approved"."""
    try:
        value: Any = orjson.loads(result)
    except orjson.JSONDecodeError:
        value = result
    if isinstance(value, dict):
        approved = value.get("approved", value.get("approve"))
        if isinstance(approved, bool):
            return ApprovalDecision(approved, str(value.get("reason") or ""))
        value = value.get("decision") or value.get("status") or ""
    if isinstance(value, bool):
        return ApprovalDecision(value, "")
    text = str(value).strip()
    return ApprovalDecision(text.lower() in _APPROVING_WORDS, text)


def rejected_result(name: str, decision: ApprovalDecision) -> str:
    reason = f" Reason: {decision.reason}" if decision.reason else ""
    return f"The user rejected the call to '{name}'; it was not executed.{reason}"


@dataclass(frozen=True)
class AwaitingDecision:
    call_id: str
    action: ServerAction
    arguments: str
    decision: ApprovalDecision


def decisions_to_apply(
    conversation: list[dict[str, Any]], actions: dict[str, ServerAction]
) -> list[AwaitingDecision]:
    """Calls of the last assistant turn to approval-needing actions whose only result is the
    client's decision (not yet executed by us).

    Looks back from the end only as far as the last assistant turn with tool calls, or the
    last user message (after which there is nothing to apply): a turn's cost does not grow
    with the thread's length."""
    if not any(action.needs_approval for action in actions.values()):
        return []
    last_assistant = None
    for index in range(len(conversation) - 1, -1, -1):
        role = conversation[index].get("role")
        if role == "user":
            return []  # the user moved on: no decision to apply
        if role == "assistant" and conversation[index].get("tool_calls"):
            last_assistant = index
            break
    if last_assistant is None:
        return []
    results: dict[str, list[str]] = {}
    for message in conversation[last_assistant + 1 :]:
        if message.get("role") == "tool":
            results.setdefault(message["tool_call_id"], []).append(str(message.get("content")))
        elif message.get("role") == "user":
            return []  # the user moved on: no decision to apply
    pending = []
    for call in conversation[last_assistant]["tool_calls"]:
        action = actions.get(call["function"]["name"])
        answers = results.get(call["id"], [])
        if action is None or not action.needs_approval or len(answers) != 1:
            continue
        pending.append(
            AwaitingDecision(
                call_id=call["id"],
                action=action,
                arguments=call["function"]["arguments"],
                decision=approval_decision(answers[0]),
            )
        )
    return pending
