"""The v1 GraphQL objects of an interrupt and of an agent state, built one way for every path
that resolves them (the ``generateCopilotResponse`` resolver's pump and the ``runEvents`` /
``copilotStream`` subscription payloads); the fast path writes the same fields as JSON
(fastpath/encoder.py), and tests/copilot_runtime/graphql/test_v1_parity.py holds them equal."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import orjson

from copilot_runtime.events import AgentStateSnapshot
from copilot_runtime.graphql.types.enums import MessageRole
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
from copilot_runtime.graphql.types.statuses import SuccessMessageStatus
from copilot_runtime.graphql.v1_rules import (
    COPILOTKIT_INTERRUPT,
    INTERRUPT_ALIASES,
    LANGGRAPH_INTERRUPT,
    interrupt_message_item,
    meta_text,
)


def agent_state_message(event: AgentStateSnapshot) -> AgentStateMessageOutput:
    return AgentStateMessageOutput(
        id=f"ck-{uuid.uuid4()}",
        created_at=dt.datetime.now(dt.UTC),
        thread_id=event.thread_id,
        agent_name=event.agent_name,
        node_name=event.node_name,
        run_id=event.run_id,
        active=event.active,
        role=MessageRole(event.role),
        state=orjson.dumps(event.state).decode(),
        running=event.running,
        status_source=SuccessMessageStatus(),
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
    now = dt.datetime.now(dt.UTC)
    messages = [
        _interrupt_message(raw, now) for raw in data.get("messages") or [] if isinstance(raw, dict)
    ]
    return CopilotKitLangGraphInterruptEvent(
        data=CopilotKitLangGraphInterruptEventData(
            value=meta_text(data.get("value")), messages=messages
        )
    )
