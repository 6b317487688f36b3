"""The v1 input (``GenerateCopilotResponseInput`` variables) as the protocol-neutral
``TurnRequest`` (copilot_runtime/events/request.py)."""

from __future__ import annotations

from typing import Any

import orjson

from copilot_runtime.events.request import (
    BadTurnRequest,
    ForwardedParameters,
    FrontendAction,
    InputMessage,
    TurnRequest,
    parse_datetime,
)
from copilot_runtime.history import HISTORIES, V1, BodyRead, KnownHistory

# The v1 parse's form of a known history (copilot_runtime/history): the message each one
# parsed into. Only checked messages reach the parser, in their plain form (the fast check's
# output, or graphql-core's coerced values made plain): the fast check takes those it holds
# as checked (``parsed_range``).
PARSED = "graphql.parsed"


def v1_history(
    data: Any, owner_id: int | None, read: BodyRead | None = None
) -> KnownHistory | None:
    """The known history of the input's messages, entering with its request (``read``: what
    the request's bytes told of it); None for an input without a messages array."""
    messages = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(messages, list):
        return None
    session = data.get("agentSession")
    thread_id = data.get("threadId") or (
        session.get("threadId") if isinstance(session, dict) else None
    )
    thread = (owner_id, thread_id) if isinstance(thread_id, str) and thread_id else None
    return HISTORIES.enter(V1, messages, thread=thread, read=read)


def parsed_range(history: KnownHistory | None, raws: Any) -> tuple[int, int]:
    """``(start, stop)``: ``raws[start:stop]`` are messages of ``history`` parsed before."""
    if history is None or history.raws is not raws:
        return 0, 0
    start, stop, _made = history.reuse(PARSED, raws)
    return start, stop


def _parse_arguments(raw: str) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_value": value}


def parse_input_message(raw: dict[str, Any]) -> InputMessage:
    """One ``MessageInput``: exactly one of its message fields is set."""
    message_id = raw.get("id") or ""
    created_at = parse_datetime(raw.get("createdAt"))
    if text := raw.get("textMessage"):
        return InputMessage(
            id=message_id,
            kind="text",
            created_at=created_at,
            role=text.get("role") or "user",
            content=text.get("content") or "",
            parent_message_id=text.get("parentMessageId") or "",
        )
    if action := raw.get("actionExecutionMessage"):
        return InputMessage(
            id=message_id,
            kind="action_execution",
            created_at=created_at,
            role="assistant",
            action_name=action.get("name") or "",
            arguments=_parse_arguments(action.get("arguments") or ""),
            parent_message_id=action.get("parentMessageId") or "",
        )
    if result := raw.get("resultMessage"):
        return InputMessage(
            id=message_id,
            kind="result",
            created_at=created_at,
            role="tool",
            action_name=result.get("actionName") or "",
            action_execution_id=result.get("actionExecutionId") or "",
            result=result.get("result") or "",
            parent_message_id=result.get("parentMessageId") or "",
        )
    if image := raw.get("imageMessage"):
        return InputMessage(
            id=message_id,
            kind="image",
            created_at=created_at,
            role=image.get("role") or "user",
            image_format=image.get("format") or "",
            image_bytes=image.get("bytes") or "",
            parent_message_id=image.get("parentMessageId") or "",
        )
    if state := raw.get("agentStateMessage"):
        try:
            parsed_state = orjson.loads(state.get("state") or "{}")
        except orjson.JSONDecodeError:
            parsed_state = {}
        return InputMessage(
            id=message_id,
            kind="agent_state",
            created_at=created_at,
            role=state.get("role") or "assistant",
            action_name=state.get("agentName") or "",
            agent_state=parsed_state if isinstance(parsed_state, dict) else {},
        )
    raise BadTurnRequest(
        f"Message '{message_id}' has none of textMessage, actionExecutionMessage, "
        "resultMessage, imageMessage or agentStateMessage."
    )


def _parse_action(raw: dict[str, Any]) -> FrontendAction:
    try:
        schema = orjson.loads(raw.get("jsonSchema") or "{}")
    except orjson.JSONDecodeError as exc:
        raise BadTurnRequest(
            f"Action '{raw.get('name')}' has a jsonSchema that is not valid JSON."
        ) from exc
    return FrontendAction(
        name=raw.get("name") or "",
        description=raw.get("description") or "",
        parameters=schema if isinstance(schema, dict) else {},
        available=raw.get("available") or "enabled",
    )


def _parse_forwarded(raw: dict[str, Any] | None) -> ForwardedParameters:
    raw = raw or {}
    max_tokens = raw.get("maxTokens")
    return ForwardedParameters(
        model=raw.get("model"),
        max_tokens=int(max_tokens) if max_tokens is not None else None,
        stop=raw.get("stop"),
        temperature=raw.get("temperature"),
        tool_choice=raw.get("toolChoice"),
        tool_choice_function_name=raw.get("toolChoiceFunctionName"),
    )


def parse_generate_input(
    data: dict[str, Any],
    properties: dict[str, Any] | None,
    history: KnownHistory | None = None,
) -> TurnRequest:
    """A ``TurnRequest`` from coerced ``GenerateCopilotResponseInput`` variables. The messages
    of ``history`` (``v1_history``, for these very messages) parsed before are not again."""
    raws = data.get("messages") or []
    if history is not None and history.raws is not raws:
        history = None
    start, stop, known = history.reuse(PARSED, raws) if history is not None else (0, 0, [])
    messages = [parse_input_message(raw) for raw in raws[:start]]
    messages += known
    messages += [parse_input_message(raw) for raw in raws[stop:]]
    if history is not None:
        history.keep_each(PARSED, raws, messages, start, stop)
    frontend = data.get("frontend") or {}
    actions = [
        action
        for action in (_parse_action(raw) for raw in frontend.get("actions") or [])
        # Disabled actions are dropped outright, as the TypeScript runtime does.
        if action.available != "disabled"
    ]
    agent_session = data.get("agentSession")
    agent_states = list(data.get("agentStates") or [])
    if data.get("agentState"):
        agent_states.append(data["agentState"])
    return TurnRequest(
        thread_id=data.get("threadId") or (agent_session or {}).get("threadId") or None,
        messages=messages,
        actions=actions,
        context=[
            (entry.get("description") or "", entry.get("value") or "")
            for entry in data.get("context") or []
        ],
        forwarded=_parse_forwarded(data.get("forwardedParameters")),
        request_type=(data.get("metadata") or {}).get("requestType") or "Chat",
        previous_run_id=data.get("runId"),
        agent_name=(agent_session or {}).get("agentName") or "default",
        agent_session=agent_session,
        agent_states=agent_states,
        meta_events=list(data.get("metaEvents") or []),
        extensions=data.get("extensions"),
        properties=dict(properties or {}),
        frontend_url=frontend.get("url"),
        cloud=data.get("cloud"),
        history=history,
    )
