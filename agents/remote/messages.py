"""The thread's messages as the TypeScript runtime serialises them for ``/agents/execute``."""

from __future__ import annotations

from typing import Any

from copilot_runtime.events.request import InputMessage

_EPOCH = "1970-01-01T00:00:00.000Z"


def _created_at(message: InputMessage) -> str:
    if message.created_at is None:
        return _EPOCH
    moment = message.created_at
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def runtime_message(message: InputMessage) -> dict[str, Any] | None:
    """One message as the runtime's ``Message`` class instance JSON (undefined fields left out);
    agent state messages are the frontend's view of an agent and are not sent."""
    base: dict[str, Any] = {"id": message.id, "createdAt": _created_at(message)}
    if message.kind == "text":
        entry = {**base, "type": "TextMessage", "content": message.content, "role": message.role}
    elif message.kind == "action_execution":
        entry = {
            **base,
            "type": "ActionExecutionMessage",
            "name": message.action_name,
            "arguments": message.arguments or {},
        }
    elif message.kind == "result":
        entry = {
            **base,
            "type": "ResultMessage",
            "actionExecutionId": message.action_execution_id,
            "actionName": message.action_name,
            "result": message.result,
        }
    elif message.kind == "image":
        entry = {
            **base,
            "type": "ImageMessage",
            "format": message.image_format,
            "bytes": message.image_bytes,
            "role": message.role,
        }
    else:
        return None
    if message.parent_message_id:
        entry["parentMessageId"] = message.parent_message_id
    return entry


def runtime_messages(messages: list[InputMessage]) -> list[dict[str, Any]]:
    return [entry for entry in map(runtime_message, messages) if entry is not None]
