"""LangGraph ``astream_events`` lines (``{"event": "on_chat_model_stream", ...}``) as events.

What a LangGraph agent behind a CopilotKit remote endpoint streams: LangChain's
``astream_events(version="v2")`` events, serialised with ``langchain_dumps`` (a message chunk
is ``{"lc": 1, "type": "constructor", "id": [...], "kwargs": {...}}``), interleaved with
CopilotKit's own events. The mapping follows what the TypeScript runtime does:

- ``on_chat_model_stream``: the chunk's text content streams a text message named by the
  chunk's id; ``tool_call_chunks`` carrying a name and an id start a tool call, later chunks
  (same ``index``) stream its arguments; ``finish_reason`` ``tool_calls`` ends the calls and
  ``stop`` ends the text. ``metadata["copilotkit:emit-messages"]`` (false) hides the text and
  ``metadata["copilotkit:emit-tool-calls"]`` (false, a name or a list of names) the calls;
- ``on_chat_model_end`` ends whatever that model call left open;
- ``on_copilotkit_state_sync``: a state snapshot;
- ``on_interrupt``: a ``LangGraphInterruptEvent`` (its ``value`` as sent, a JSON string);
  ``on_copilotkit_interrupt``: a ``CopilotKitLangGraphInterruptEvent`` (``data``);
- ``on_copilotkit_error``: the run fails with the agent's message;
- custom events: ``copilotkit_manually_emit_message`` (a whole text message),
  ``copilotkit_manually_emit_tool_call`` (a whole tool call),
  ``copilotkit_manually_emit_intermediate_state`` (a state snapshot) and ``copilotkit_exit``
  (a meta event ``Exit``, kept in the log, not streamed to v1 clients).

Anything else (chain and tool start/end events, ...) is ignored.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from agents.interrupts import copilotkit_interrupt, langgraph_interrupt
from agents.peer_events.copilotkit import AGENT_ERROR_CODE, parse_state
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionStart,
    AgentStateSnapshot,
    Event,
    MetaEvent,
    RunError,
    TextDelta,
    TextEnd,
    TextStart,
)

EXIT_EVENT_NAME = "Exit"


@dataclass
class _Call:
    id: str
    name: str
    emitted: bool
    open: bool = True


def _chunk_fields(line: dict[str, Any]) -> dict[str, Any]:
    """The message chunk's fields: under ``kwargs`` when serialised by langchain_dumps."""
    data = line.get("data") if isinstance(line.get("data"), dict) else {}
    chunk = data.get("chunk")
    if not isinstance(chunk, dict):
        return {}
    kwargs = chunk.get("kwargs")
    return kwargs if isinstance(kwargs, dict) else chunk


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _allows(flag: Any, name: str) -> bool:
    if isinstance(flag, bool):
        return flag
    if isinstance(flag, list):
        return name in flag
    if isinstance(flag, str):
        return flag == name
    return True


@dataclass
class LangGraphEventMapper:
    """Stateful: one mapper per stream."""

    _message_id: str | None = None
    _text_open: str | None = None
    _calls: dict[int, _Call] = field(default_factory=dict)

    def feed(self, line: dict[str, Any]) -> list[Event]:
        name = line.get("event")
        if name == "on_chat_model_stream":
            return self._model_stream(line)
        if name == "on_chat_model_end":
            return self._close_model_call()
        if name == "on_copilotkit_state_sync":
            return [
                AgentStateSnapshot(
                    thread_id=str(line.get("thread_id") or ""),
                    agent_name=str(line.get("agent_name") or ""),
                    state=parse_state(line.get("state")),
                    node_name=str(line.get("node_name") or ""),
                    run_id=str(line.get("run_id") or ""),
                    active=bool(line.get("active", True)),
                    running=bool(line.get("running", True)),
                    role=str(line.get("role") or "assistant"),
                )
            ]
        if name == "on_interrupt":
            return [langgraph_interrupt(line.get("value"))]
        if name == "on_copilotkit_interrupt":
            data = line.get("data") if isinstance(line.get("data"), dict) else {}
            return [copilotkit_interrupt(data.get("value"), data.get("messages") or [])]
        if name == "on_copilotkit_error":
            return [self._error(line)]
        if name == "on_custom_event":
            return self._custom(line)
        return []

    def _model_stream(self, line: dict[str, Any]) -> list[Event]:
        fields = _chunk_fields(line)
        metadata = line.get("metadata") if isinstance(line.get("metadata"), dict) else {}
        emit_messages = metadata.get("copilotkit:emit-messages", True) is not False
        emit_calls = metadata.get("copilotkit:emit-tool-calls", True)
        if fields.get("id"):
            self._message_id = str(fields["id"])
        elif self._message_id is None:
            self._message_id = f"ck-{uuid.uuid4()}"
        message_id = self._message_id
        out: list[Event] = []

        tool_chunks = [c for c in fields.get("tool_call_chunks") or [] if isinstance(c, dict)]
        for chunk in tool_chunks:
            index = int(chunk.get("index") or 0)
            if chunk.get("name") and chunk.get("id"):
                call = _Call(
                    id=str(chunk["id"]),
                    name=str(chunk["name"]),
                    emitted=_allows(emit_calls, str(chunk["name"])),
                )
                self._calls[index] = call
                if call.emitted:
                    out.extend(self._end_text())
                    out.append(
                        ActionStart(
                            action_execution_id=call.id,
                            action_name=call.name,
                            parent_message_id=message_id,
                        )
                    )
            call = self._calls.get(index)
            args = chunk.get("args")
            if call is not None and call.emitted and call.open and isinstance(args, str) and args:
                out.append(ActionArgs(action_execution_id=call.id, delta=args))

        text = _content_text(fields.get("content"))
        if text and emit_messages and not tool_chunks:
            if self._text_open != message_id:
                out.extend(self._end_text())
                self._text_open = message_id
                out.append(TextStart(message_id=message_id))
            out.append(TextDelta(message_id=message_id, delta=text))

        metadata_of_response = fields.get("response_metadata") or {}
        finish = (
            metadata_of_response.get("finish_reason")
            if isinstance(metadata_of_response, dict)
            else None
        )
        if finish == "tool_calls":
            out.extend(self._end_calls())
        elif finish == "stop":
            out.extend(self._end_text())
        return out

    def _end_text(self) -> list[Event]:
        if self._text_open is None:
            return []
        message_id, self._text_open = self._text_open, None
        return [TextEnd(message_id=message_id)]

    def _end_calls(self) -> list[Event]:
        out: list[Event] = []
        for call in self._calls.values():
            if call.open:
                call.open = False
                if call.emitted:
                    out.append(ActionEnd(action_execution_id=call.id))
        self._calls = {}
        return out

    def _close_model_call(self) -> list[Event]:
        out = [*self._end_text(), *self._end_calls()]
        self._message_id = None
        return out

    @staticmethod
    def _error(line: dict[str, Any]) -> RunError:
        data = line.get("data") if isinstance(line.get("data"), dict) else {}
        error = data.get("error") if isinstance(data.get("error"), dict) else {}
        message = str(error.get("message") or "no details")
        kind = error.get("type")
        details: dict[str, Any] = {}
        if error.get("agent_name"):
            details["agentName"] = error["agent_name"]
        if error.get("status_code"):
            details["statusCode"] = error["status_code"]
        return RunError(
            message=f"The agent reported an error: {kind + ': ' if kind else ''}{message}",
            code=AGENT_ERROR_CODE,
            details=details,
        )

    def _custom(self, line: dict[str, Any]) -> list[Event]:
        name = line.get("name")
        data = line.get("data")
        if name == "copilotkit_manually_emit_message" and isinstance(data, dict):
            message_id = str(data.get("message_id") or f"ck-{uuid.uuid4()}")
            return [
                *self._end_text(),
                TextStart(message_id=message_id),
                TextDelta(message_id=message_id, delta=str(data.get("message") or "")),
                TextEnd(message_id=message_id),
            ]
        if name == "copilotkit_manually_emit_tool_call" and isinstance(data, dict):
            call_id = str(data.get("id") or f"ck-{uuid.uuid4()}")
            args = data.get("args")
            return [
                ActionStart(
                    action_execution_id=call_id,
                    action_name=str(data.get("name") or ""),
                    parent_message_id=call_id,
                ),
                ActionArgs(
                    action_execution_id=call_id,
                    delta=args if isinstance(args, str) else orjson.dumps(args or {}).decode(),
                ),
                ActionEnd(action_execution_id=call_id),
            ]
        if name == "copilotkit_manually_emit_intermediate_state":
            metadata = line.get("metadata") if isinstance(line.get("metadata"), dict) else {}
            return [
                AgentStateSnapshot(
                    thread_id="",
                    agent_name="",
                    state=parse_state(data),
                    node_name=str(metadata.get("langgraph_node") or ""),
                )
            ]
        if name == "copilotkit_exit":
            return [MetaEvent(name=EXIT_EVENT_NAME, value=True)]
        return []
