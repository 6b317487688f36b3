"""The AG-UI ``RunAgentInput`` for one turn, as the TypeScript runtime builds it (4.2).

Messages: text as ``{id, role, content}``; tool calls folded into their parent assistant
message as ``toolCalls`` (``{id, type: "function", function: {name, arguments}}``); results as
``{id, role: "tool", content, toolCallId}``; images as a user message with an image part.
``state`` is the agent's state for the turn; ``tools`` the server actions and the frontend
actions; ``context`` the app's readables; ``forwardedProps`` the request's properties plus
``config`` (the client's agent config), ``nodeName`` and, when the request answers an
interrupt, ``command: {resume}``, with ``resume`` entries too when the interrupt had ids.
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from agents.interrupts import InterruptAnswer
from agents.remote.runner import agent_config, offered_actions
from copilot_runtime.engine.actions import ServerAction
from copilot_runtime.events.media_parts import agui_media_part
from copilot_runtime.events.request import InputMessage, TurnRequest

_ROLES = frozenset({"user", "assistant", "system", "developer"})


def agui_messages(messages: list[InputMessage]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    assistants: dict[str, dict[str, Any]] = {}
    for message in messages:
        if message.kind == "text":
            role = message.role if message.role in _ROLES else "user"
            entry: dict[str, Any] = {"id": message.id, "role": role, "content": message.content}
            out.append(entry)
            if role == "assistant":
                assistants[message.id] = entry
        elif message.kind == "action_execution":
            call = {
                "id": message.id,
                "type": "function",
                "function": {
                    "name": message.action_name,
                    "arguments": orjson.dumps(message.arguments or {}).decode(),
                },
            }
            parent_id = message.parent_message_id or message.id
            parent = assistants.get(parent_id)
            if parent is None:
                parent = {"id": parent_id, "role": "assistant", "content": ""}
                assistants[parent_id] = parent
                out.append(parent)
            parent.setdefault("toolCalls", []).append(call)
        elif message.kind == "result":
            out.append(
                {
                    "id": message.id,
                    "role": "tool",
                    "content": message.result,
                    "toolCallId": message.action_execution_id,
                }
            )
        elif message.kind in ("image", "document"):
            part = agui_media_part(
                kind=message.kind,
                media_format=message.image_format,
                payload=message.image_bytes,
                filename=message.content,
            )
            out.append({"id": message.id, "role": "user", "content": [part]})
    return out


def agui_tools(
    request: TurnRequest, server_actions: dict[str, ServerAction]
) -> list[dict[str, Any]]:
    return offered_actions(request, server_actions)


def run_agent_input(
    *,
    request: TurnRequest,
    agent_name: str,
    server_actions: dict[str, ServerAction],
    answer: InterruptAnswer | None,
    extra_forwarded_props: dict[str, Any] | None = None,
) -> dict[str, Any]:
    forwarded: dict[str, Any] = {**(extra_forwarded_props or {}), **request.properties}
    config = agent_config(request, agent_name)
    if config:
        forwarded["config"] = config
    node_name = (request.agent_session or {}).get("nodeName")
    if node_name:
        forwarded["nodeName"] = node_name
    body: dict[str, Any] = {
        "threadId": request.thread_id or "",
        "runId": str(uuid.uuid4()),
        "state": dict(request.state),
        "messages": agui_messages(request.messages),
        "tools": agui_tools(request, server_actions),
        "context": [
            {"description": description, "value": value} for description, value in request.context
        ],
        "forwardedProps": forwarded,
    }
    if answer is not None:
        forwarded["command"] = {"resume": answer.response}
        if answer.interrupt_ids:
            body["resume"] = [
                {"interruptId": interrupt_id, "status": "resolved", "payload": answer.response}
                for interrupt_id in answer.interrupt_ids
            ]
    return body
