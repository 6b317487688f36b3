"""The runtime's stored messages as LangGraph (LangChain) message dicts, for a run's input."""

from __future__ import annotations

from typing import Any

from copilot_runtime.events.request import InputMessage

_TYPES = {"user": "human", "assistant": "ai", "system": "system", "developer": "system"}


def langgraph_messages(messages: list[InputMessage]) -> list[dict[str, Any]]:
    """Text messages with their ids (so the thread's own copies are recognised), tool calls
    folded into their assistant message, tool results as tool messages."""
    out: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.kind == "text" and message.role in _TYPES:
            entry = {"type": _TYPES[message.role], "content": message.content, "id": message.id}
            out.append(entry)
            by_id[message.id] = entry
        elif message.kind == "action_execution":
            call = {
                "id": message.id,
                "name": message.action_name,
                "args": message.arguments or {},
                "type": "tool_call",
            }
            parent = by_id.get(message.parent_message_id)
            if parent is None or parent["type"] != "ai":
                parent_id = message.parent_message_id or message.id
                parent = {"type": "ai", "content": "", "id": parent_id}
                out.append(parent)
                by_id[parent_id] = parent
            parent.setdefault("tool_calls", []).append(call)
        elif message.kind == "result":
            out.append(
                {
                    "type": "tool",
                    "content": message.result,
                    "tool_call_id": message.action_execution_id,
                    "name": message.action_name,
                    "id": message.id,
                }
            )
    return out
