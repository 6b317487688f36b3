"""Runtime-event lines (``{"type": "TextMessageStart", ...}``) as canonical events.

These are what the ``copilotkit`` SDK's ``emit_runtime_events`` writes (CrewAI agents and any
agent built on ``copilotkit.Agent``): already CopilotKit runtime events, one per line.
"""

from __future__ import annotations

from typing import Any

import orjson

from agents.interrupts import COPILOTKIT_INTERRUPT, interrupt_value_text
from copilot_runtime.engine.actions import encode_result
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    MetaEvent,
    RunError,
    TextDelta,
    TextEnd,
    TextStart,
)

AGENT_ERROR_CODE = "AGENT_ERROR"


def parse_state(raw: Any) -> dict[str, Any]:
    """A state sent as an object or as a JSON string of one."""
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            return {}
    return raw if isinstance(raw, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def runtime_event_line(line: dict[str, Any]) -> list[Event]:
    """The canonical events of one runtime-event line; unknown or lifecycle lines give none."""
    kind = line.get("type")
    if kind == "TextMessageStart":
        return [
            TextStart(
                message_id=str(line.get("messageId") or ""),
                parent_message_id=line.get("parentMessageId") or None,
            )
        ]
    if kind == "TextMessageContent":
        content = _text(line.get("content"))
        if not content:
            return []
        return [TextDelta(message_id=str(line.get("messageId") or ""), delta=content)]
    if kind == "TextMessageEnd":
        return [TextEnd(message_id=str(line.get("messageId") or ""))]
    if kind == "ActionExecutionStart":
        return [
            ActionStart(
                action_execution_id=str(line.get("actionExecutionId") or ""),
                action_name=str(line.get("actionName") or ""),
                parent_message_id=line.get("parentMessageId") or None,
            )
        ]
    if kind == "ActionExecutionArgs":
        args = line.get("args")
        if not isinstance(args, str):
            args = orjson.dumps(args).decode() if args is not None else ""
        if not args:
            return []
        return [
            ActionArgs(action_execution_id=str(line.get("actionExecutionId") or ""), delta=args)
        ]
    if kind == "ActionExecutionEnd":
        return [ActionEnd(action_execution_id=str(line.get("actionExecutionId") or ""))]
    if kind == "ActionExecutionResult":
        return [
            ActionResult(
                action_execution_id=str(line.get("actionExecutionId") or ""),
                action_name=str(line.get("actionName") or ""),
                result=encode_result(line.get("result", "")),
            )
        ]
    if kind == "AgentStateMessage":
        return [
            AgentStateSnapshot(
                thread_id=str(line.get("threadId") or ""),
                agent_name=str(line.get("agentName") or ""),
                state=parse_state(line.get("state")),
                node_name=str(line.get("nodeName") or ""),
                run_id=str(line.get("runId") or ""),
                active=bool(line.get("active", True)),
                running=bool(line.get("running", True)),
                role=str(line.get("role") or "assistant"),
            )
        ]
    if kind == "MetaEvent":
        name = str(line.get("name") or "")
        if name == COPILOTKIT_INTERRUPT:
            data = line.get("data") if isinstance(line.get("data"), dict) else {}
            return [MetaEvent(name=name, data=dict(data))]
        value = line.get("value")
        return [
            MetaEvent(name=name, value=interrupt_value_text(value) if value is not None else None)
        ]
    if kind == "RunError":
        error = line.get("error")
        message = line.get("message")
        if isinstance(error, dict):
            message = error.get("message") or message
        elif isinstance(error, str):
            message = error
        return [
            RunError(
                message=f"The agent reported an error: {message or 'no details'}",
                code=AGENT_ERROR_CODE,
            )
        ]
    return []
