"""The model request of a turn: the thread's messages, the context and the offered tools."""

from __future__ import annotations

from typing import Any

import orjson

from copilot_runtime.engine.actions import ServerAction
from copilot_runtime.events.request import FrontendAction, InputMessage


def _context_message(context: list[tuple[str, str]]) -> dict[str, Any] | None:
    if not context:
        return None
    lines = ["The application shares this context with you:"]
    lines.extend(f"- {description}: {value}" for description, value in context)
    return {"role": "system", "content": "\n".join(lines)}


def model_messages(
    messages: list[InputMessage], context: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """OpenAI chat messages for the thread: tool calls folded into their assistant message.

    Tool results without a matching tool call are dropped (the model API rejects them), and a
    repeated result for the same call is sent once, with the latest content.
    """
    out: list[dict[str, Any]] = []
    context_message = _context_message(context)
    if context_message is not None:
        out.append(context_message)

    calls_by_parent: dict[str, dict[str, Any]] = {}
    known_calls: set[str] = set()
    answered: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.kind == "text":
            entry: dict[str, Any] = {"role": message.role or "user", "content": message.content}
            out.append(entry)
            if message.role == "assistant":
                calls_by_parent[message.id] = entry
        elif message.kind == "action_execution":
            call = {
                "id": message.id,
                "type": "function",
                "function": {
                    "name": message.action_name,
                    "arguments": orjson.dumps(message.arguments or {}).decode(),
                },
            }
            known_calls.add(message.id)
            parent = (
                calls_by_parent.get(message.parent_message_id)
                if message.parent_message_id
                else None
            )
            if (
                parent is None
                and out
                and out[-1].get("role") == "assistant"
                and "tool_calls" in out[-1]
            ):
                parent = out[-1]
            if parent is None:
                parent = {"role": "assistant", "content": None}
                out.append(parent)
                if message.parent_message_id:
                    calls_by_parent[message.parent_message_id] = parent
            parent.setdefault("tool_calls", []).append(call)
        elif message.kind == "result":
            call_id = message.action_execution_id
            if call_id not in known_calls:
                continue
            if call_id in answered:
                # A later result for the same call wins: after an approval, the action's own
                # result follows the client's decision.
                answered[call_id]["content"] = message.result
                continue
            entry = {"role": "tool", "tool_call_id": call_id, "content": message.result}
            answered[call_id] = entry
            out.append(entry)
        elif message.kind == "image":
            out.append(
                {
                    "role": message.role or "user",
                    "content": [
                        {
                            "type": "image_url",
                            "image_url": {
                                "url": f"data:image/{message.image_format};base64,"
                                f"{message.image_bytes}"
                            },
                        }
                    ],
                }
            )
        # Agent state messages are the frontend's view of an agent; the model never sees them.
    # Without tool calls there is nothing to drop (a text-only thread skips a second pass).
    return _without_unanswered_calls(out) if known_calls else out


def _without_unanswered_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop tool calls that never got a result: the model API refuses such a history."""
    answered = {m["tool_call_id"] for m in messages if m.get("role") == "tool"}
    cleaned: list[dict[str, Any]] = []
    for message in messages:
        calls = message.get("tool_calls")
        if calls is not None:
            kept = [call for call in calls if call["id"] in answered]
            message = {key: value for key, value in message.items() if key != "tool_calls"}
            if kept:
                message["tool_calls"] = kept
            elif not message.get("content"):
                continue
        cleaned.append(message)
    return cleaned


def offered_tools(
    frontend_actions: list[FrontendAction], server_actions: dict[str, ServerAction]
) -> list[dict[str, Any]]:
    """Tools for the model: server actions and enabled frontend actions (``remote`` ones are
    not offered; ``disabled`` ones were dropped when the request was parsed)."""
    tools = [action.tool_definition() for action in server_actions.values()]
    for action in frontend_actions:
        if action.available == "remote" or action.name in server_actions:
            continue
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": action.name,
                    "description": action.description,
                    "parameters": action.parameters or {"type": "object", "properties": {}},
                },
            }
        )
    return tools
