"""The v1 GraphQL objects of a run's messages, meta events and statuses, built one way for
every path that resolves them: the general executor's pump (``resolvers/generate.py``) and the
``runEvents`` / ``copilotStream`` subscription payloads (``types/run_events.py``). The fast path
writes the same fields as JSON (``fastpath/encoder.py``); tests/copilot_runtime/graphql/
test_v1_parity.py holds the three equal."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import orjson

from copilot_runtime.events import (
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    TextStart,
    result_message_id,
)
from copilot_runtime.graphql.types.enums import FailedResponseStatusReason, MessageRole
from copilot_runtime.graphql.types.messages import (
    ActionExecutionMessageOutput,
    AgentStateMessageOutput,
    ResultMessageOutput,
    TextMessageOutput,
)
from copilot_runtime.graphql.types.meta_events import (
    BaseMetaEvent,
    CopilotKitLangGraphInterruptEvent,
    CopilotKitLangGraphInterruptEventData,
    LangGraphInterruptEvent,
)
from copilot_runtime.graphql.types.statuses import (
    FailedMessageStatus,
    FailedResponseStatus,
    ResponseStatus,
    SuccessMessageStatus,
    SuccessResponseStatus,
)
from copilot_runtime.graphql.v1_rules import (
    COPILOTKIT_INTERRUPT,
    INTERRUPT_ALIASES,
    LANGGRAPH_INTERRUPT,
    interrupt_message_item,
    meta_text,
)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def text_message(event: TextStart, *, content: Any, status: Any) -> TextMessageOutput:
    """``content`` and ``status`` are sources: the streamed chunks and the status to come."""
    return TextMessageOutput(
        id=event.message_id,
        created_at=_now(),
        role=MessageRole(event.role),
        parent_message_id=event.parent_message_id,
        content_source=content,
        status_source=status,
    )


def action_message(
    event: ActionStart, *, arguments: Any, status: Any
) -> ActionExecutionMessageOutput:
    return ActionExecutionMessageOutput(
        id=event.action_execution_id,
        created_at=_now(),
        name=event.action_name,
        parent_message_id=event.parent_message_id,
        arguments_source=arguments,
        status_source=status,
    )


def result_message(event: ActionResult) -> ResultMessageOutput:
    return ResultMessageOutput(
        id=result_message_id(event.action_execution_id),
        created_at=_now(),
        action_execution_id=event.action_execution_id,
        action_name=event.action_name,
        result=event.result,
        status_source=SuccessMessageStatus(),
    )


def agent_state_message(
    event: AgentStateSnapshot, *, message_id: str | None = None
) -> AgentStateMessageOutput:
    """A fresh ``ck-`` id unless the caller has a stable one (a replay of the log has)."""
    return AgentStateMessageOutput(
        id=message_id or f"ck-{uuid.uuid4()}",
        created_at=_now(),
        thread_id=event.thread_id,
        agent_name=event.agent_name,
        node_name=event.node_name,
        run_id=event.run_id,
        active=event.active,
        role=MessageRole(event.role),
        # JSON text: the client parses it itself.
        state=orjson.dumps(event.state).decode(),
        running=event.running,
        status_source=SuccessMessageStatus(),
    )


def message_status(reason: str | None) -> SuccessMessageStatus | FailedMessageStatus:
    """A message's final status: success, or failed with ``reason``."""
    return SuccessMessageStatus() if reason is None else FailedMessageStatus(reason=reason)


def response_status(wire: dict[str, Any]) -> ResponseStatus:
    """The object of a response status ``v1_rules`` gave as wire JSON."""
    if wire["code"] == "Success":
        return SuccessResponseStatus()
    return FailedResponseStatus(
        reason=FailedResponseStatusReason[wire["reason"]], details=wire["details"]
    )


def _interrupt_message(raw: dict[str, Any], now: dt.datetime) -> Any:
    item, typename = interrupt_message_item(raw)
    if typename == "ActionExecutionMessageOutput":
        return ActionExecutionMessageOutput(
            id=item["id"],
            created_at=now,
            name=item["name"],
            parent_message_id=item["parentMessageId"],
            arguments_source=item["arguments"],
            status_source=SuccessMessageStatus(),
        )
    if typename == "ResultMessageOutput":
        return ResultMessageOutput(
            id=item["id"],
            created_at=now,
            action_execution_id=item["actionExecutionId"],
            action_name=item["actionName"],
            result=item["result"],
            status_source=SuccessMessageStatus(),
        )
    return TextMessageOutput(
        id=item["id"],
        created_at=now,
        role=MessageRole(item["role"]),
        parent_message_id=item.get("parentMessageId"),
        content_source=item["content"],
        status_source=SuccessMessageStatus(),
    )


def interrupt_meta_event(
    *, name: str, value: Any, data: dict[str, Any] | None
) -> BaseMetaEvent | None:
    """The GraphQL object of an interrupt meta event (its fields as the event or its logged
    payload hold them); None for any other meta event."""
    name = INTERRUPT_ALIASES.get(name, name)
    if name == LANGGRAPH_INTERRUPT:
        return LangGraphInterruptEvent(value=meta_text(value))
    if name != COPILOTKIT_INTERRUPT:
        return None
    data = data or {}
    now = _now()
    messages = [
        _interrupt_message(raw, now) for raw in data.get("messages") or [] if isinstance(raw, dict)
    ]
    return CopilotKitLangGraphInterruptEvent(
        data=CopilotKitLangGraphInterruptEventData(
            value=meta_text(data.get("value")), messages=messages
        )
    )
