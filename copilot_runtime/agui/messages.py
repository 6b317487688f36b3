"""Stored message rows -> AG-UI messages: tool calls grouped back into their assistant message.

One row per text message, per tool call and per tool result is how both protocols store a
conversation; AG-UI carries tool calls inside the assistant message that made them (the row's
``parent_message_id``). A tool call whose assistant message has no text (a turn that only called
tools) gets an assistant message of its own, named by that parent id.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from conversations.models import Message, MessageKind
from copilot_runtime.events.media_parts import agui_media_part

_TEXT_ROLES = frozenset({"user", "assistant", "system", "developer"})


def agui_messages(rows: Iterable[Message], *, reasoning: bool = False) -> list[dict[str, Any]]:
    """AG-UI ``Message`` objects (as ``RunAgentInput.messages`` holds them), in order; the
    stored reasoning too when ``reasoning`` (a thread's listing, not a run's input)."""
    out: list[dict[str, Any]] = []
    assistants: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.kind == MessageKind.TEXT:
            role = row.role if row.role in _TEXT_ROLES else "user"
            existing = assistants.get(row.message_id) if role == "assistant" else None
            if existing is not None:
                existing["content"] = row.content
                continue
            message: dict[str, Any] = {"id": row.message_id, "role": role, "content": row.content}
            out.append(message)
            if role == "assistant":
                assistants[row.message_id] = message
        elif row.kind == MessageKind.ACTION_EXECUTION:
            parent_id = row.parent_message_id or row.message_id
            parent = assistants.get(parent_id)
            if parent is None:
                parent = {"id": parent_id, "role": "assistant"}
                out.append(parent)
                assistants[parent_id] = parent
            parent.setdefault("toolCalls", []).append(
                {
                    "id": row.message_id,
                    "type": "function",
                    "function": {
                        "name": row.action_name,
                        "arguments": orjson.dumps(
                            row.arguments if row.arguments is not None else {}
                        ).decode(),
                    },
                }
            )
        elif row.kind == MessageKind.RESULT:
            out.append(
                {
                    "id": row.message_id,
                    "role": "tool",
                    "content": row.result,
                    "toolCallId": row.action_execution_id,
                }
            )
        elif row.kind in (MessageKind.IMAGE, MessageKind.DOCUMENT):
            part = agui_media_part(
                kind=row.kind,
                media_format=row.image_format,
                payload=row.image_bytes,
                filename=row.content,
            )
            out.append({"id": row.message_id, "role": "user", "content": [part]})
        elif row.kind == MessageKind.REASONING and reasoning:
            entry = {"id": row.message_id, "role": "reasoning", "content": row.content}
            sealed = row.arguments.get("encryptedValue") if isinstance(row.arguments, dict) else ""
            if sealed:
                entry["encryptedValue"] = sealed
            out.append(entry)
        # Agent-state rows are the frontend's copy of an agent's state: not a message.
    return out


def thread_endpoint_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``GET /threads/<id>/messages`` shape: tool calls as ``{id, name, args}``."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "assistant":
            entry: dict[str, Any] = {"id": message["id"], "role": "assistant"}
            if "content" in message:
                entry["content"] = message["content"]
            calls = message.get("toolCalls") or []
            if calls:
                entry["toolCalls"] = [
                    {
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "args": call["function"]["arguments"],
                    }
                    for call in calls
                ]
            out.append(entry)
        else:
            out.append(message)
    return out
