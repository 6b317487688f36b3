"""AG-UI events as canonical events (the TypeScript runtime's ``convertToLegacyEvents``).

- ``TEXT_MESSAGE_START/CONTENT/END`` (and ``TEXT_MESSAGE_CHUNK``): a text message;
- ``TOOL_CALL_START/ARGS/END`` (and ``TOOL_CALL_CHUNK``): a tool call; ``TOOL_CALL_RESULT``:
  its result;
- ``STATE_SNAPSHOT``: the new state; ``STATE_DELTA``: an RFC 6902 patch applied to the state
  (an unappliable patch fails the run); each change is a state snapshot, persisted and
  streamed. The state's ``messages`` (LangGraph keeps the conversation there) are left out of
  it, as loadAgentState leaves them out: they are the thread's messages, stored as such, and
  react-core would replace the chat with them. A snapshot equal to the last one is not repeated;
- ``STEP_STARTED``/``STEP_FINISHED``: the node name of the next snapshots (steps alone send
  none: one row per node transition would bury the state history);
- ``MESSAGES_SNAPSHOT``: not re-streamed: the messages it repeats were streamed (and stored)
  as they were produced;
- ``CUSTOM``: a meta event ``{name, value}``; LangGraph's ``on_interrupt`` is a
  ``LangGraphInterruptEvent``. A ``RUN_FINISHED`` with an ``interrupt`` outcome is one too
  when the stream sent no ``on_interrupt`` (its interrupt ids are kept for the resume);
- ``RUN_FINISHED``: a last snapshot with ``running: false`` when the agent has a state;
- ``RUN_ERROR``: the run fails with the agent's message;
- ``RUN_STARTED``, ``RAW``, thinking, reasoning and activity events are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.interrupts import LANGGRAPH_INTERRUPT, RAW_INTERRUPT_NAME, langgraph_interrupt
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
from copilot_runtime.events.state_patch import JsonPatchError, apply_patch

AGENT_ERROR_CODE = "AGENT_ERROR"
STATE_PATCH_CODE = "AGENT_STATE_PATCH_FAILED"
STATE_MESSAGES_KEY = "messages"
_TEXT_ROLES = frozenset({"assistant", "user", "system", "developer"})


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


@dataclass
class AguiEventMapper:
    """Stateful: one mapper per run. ``state`` starts as the state the agent was sent."""

    thread_id: str
    agent_name: str
    # The agent's whole state as it sent it (deltas apply to this one).
    state: dict[str, Any] = field(default_factory=dict)
    run_id: str = ""
    node_name: str = ""
    has_state: bool = False
    saw_interrupt: bool = False
    _call_names: dict[str, str] = field(default_factory=dict)
    _chunk_text: str | None = None
    _chunk_call: str | None = None
    _last_emitted: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.has_state = bool(self.state)
        self._last_emitted = self.visible_state()

    def visible_state(self) -> dict[str, Any]:
        return {key: value for key, value in self.state.items() if key != STATE_MESSAGES_KEY}

    def feed(self, event: dict[str, Any]) -> list[Event]:
        kind = event.get("type")
        handler = _HANDLERS.get(str(kind))
        if handler is None:
            return []
        out = self._close_chunks(kind)
        return [*out, *handler(self, event)]

    # --- text ----------------------------------------------------------------------------------

    def _text_start(self, event: dict[str, Any]) -> list[Event]:
        role = _str(event.get("role")) or "assistant"
        return [
            TextStart(
                message_id=_str(event.get("messageId")),
                role=role if role in _TEXT_ROLES else "assistant",
            )
        ]

    def _text_content(self, event: dict[str, Any]) -> list[Event]:
        delta = _str(event.get("delta"))
        return [TextDelta(message_id=_str(event.get("messageId")), delta=delta)] if delta else []

    def _text_end(self, event: dict[str, Any]) -> list[Event]:
        return [TextEnd(message_id=_str(event.get("messageId")))]

    def _text_chunk(self, event: dict[str, Any]) -> list[Event]:
        message_id = _str(event.get("messageId")) or self._chunk_text or ""
        out: list[Event] = []
        if message_id != self._chunk_text:
            if self._chunk_text is not None:
                out.append(TextEnd(message_id=self._chunk_text))
            self._chunk_text = message_id
            out.extend(self._text_start({"messageId": message_id, "role": event.get("role")}))
        out.extend(self._text_content({"messageId": message_id, "delta": event.get("delta")}))
        return out

    # --- tool calls ----------------------------------------------------------------------------

    def _call_start(self, event: dict[str, Any]) -> list[Event]:
        call_id = _str(event.get("toolCallId"))
        name = _str(event.get("toolCallName"))
        self._call_names[call_id] = name
        return [
            ActionStart(
                action_execution_id=call_id,
                action_name=name,
                parent_message_id=event.get("parentMessageId") or None,
            )
        ]

    def _call_args(self, event: dict[str, Any]) -> list[Event]:
        delta = _str(event.get("delta"))
        if not delta:
            return []
        return [ActionArgs(action_execution_id=_str(event.get("toolCallId")), delta=delta)]

    def _call_end(self, event: dict[str, Any]) -> list[Event]:
        return [ActionEnd(action_execution_id=_str(event.get("toolCallId")))]

    def _call_chunk(self, event: dict[str, Any]) -> list[Event]:
        call_id = _str(event.get("toolCallId")) or self._chunk_call or ""
        out: list[Event] = []
        if call_id != self._chunk_call:
            if self._chunk_call is not None:
                out.append(ActionEnd(action_execution_id=self._chunk_call))
            self._chunk_call = call_id
            out.extend(
                self._call_start(
                    {
                        "toolCallId": call_id,
                        "toolCallName": event.get("toolCallName"),
                        "parentMessageId": event.get("parentMessageId"),
                    }
                )
            )
        out.extend(self._call_args({"toolCallId": call_id, "delta": event.get("delta")}))
        return out

    def _call_result(self, event: dict[str, Any]) -> list[Event]:
        call_id = _str(event.get("toolCallId"))
        content = event.get("content")
        return [
            ActionResult(
                action_execution_id=call_id,
                action_name=self._call_names.get(call_id, ""),
                result=encode_result(content if content is not None else ""),
            )
        ]

    def _close_chunks(self, kind: Any) -> list[Event]:
        """A chunked message or call ends when anything else arrives."""
        out: list[Event] = []
        if kind != "TEXT_MESSAGE_CHUNK" and self._chunk_text is not None:
            out.append(TextEnd(message_id=self._chunk_text))
            self._chunk_text = None
        if kind != "TOOL_CALL_CHUNK" and self._chunk_call is not None:
            out.append(ActionEnd(action_execution_id=self._chunk_call))
            self._chunk_call = None
        return out

    # --- state ---------------------------------------------------------------------------------

    def _snapshot(self, *, running: bool = True, active: bool = True) -> AgentStateSnapshot:
        visible = self.visible_state()
        self._last_emitted = visible
        return AgentStateSnapshot(
            thread_id=self.thread_id,
            agent_name=self.agent_name,
            state=visible,
            node_name=self.node_name,
            run_id=self.run_id,
            active=active,
            running=running,
        )

    def _changed_snapshot(self) -> list[Event]:
        self.has_state = True
        if self.visible_state() == self._last_emitted:
            return []
        return [self._snapshot()]

    def _state_snapshot(self, event: dict[str, Any]) -> list[Event]:
        snapshot = event.get("snapshot")
        self.state = dict(snapshot) if isinstance(snapshot, dict) else {}
        return self._changed_snapshot()

    def _state_delta(self, event: dict[str, Any]) -> list[Event]:
        delta = event.get("delta")
        try:
            patched = apply_patch(self.state, delta if isinstance(delta, list) else [])
        except JsonPatchError as exc:
            return [
                RunError(
                    message=f"The agent sent a state delta that does not apply: {exc}",
                    code=STATE_PATCH_CODE,
                )
            ]
        self.state = patched if isinstance(patched, dict) else {}
        return self._changed_snapshot()

    def _step(self, event: dict[str, Any]) -> list[Event]:
        self.node_name = _str(event.get("stepName")) or self.node_name
        return []

    # --- run -----------------------------------------------------------------------------------

    def _run_started(self, event: dict[str, Any]) -> list[Event]:
        self.run_id = _str(event.get("runId")) or self.run_id
        return []

    def _run_finished(self, event: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        outcome = event.get("outcome")
        if (
            isinstance(outcome, dict)
            and outcome.get("type") == "interrupt"
            and not self.saw_interrupt
        ):
            interrupts = [i for i in outcome.get("interrupts") or [] if isinstance(i, dict)]
            if interrupts:
                self.saw_interrupt = True
                first = interrupts[0]
                raw = ((first.get("metadata") or {}).get("langgraph") or {}).get("raw")
                value = raw if raw is not None else first.get("message") or first
                ids = tuple(str(i["id"]) for i in interrupts if i.get("id"))
                out.append(langgraph_interrupt(value, interrupt_ids=ids))
        if self.has_state and self.visible_state():
            out.append(self._snapshot(running=False, active=False))
        return out

    def _run_error(self, event: dict[str, Any]) -> list[Event]:
        message = _str(event.get("message")) or "no details"
        details = {"agentCode": event["code"]} if event.get("code") else {}
        return [
            RunError(
                message=f"The agent reported an error: {message}",
                code=AGENT_ERROR_CODE,
                details=details,
            )
        ]

    def _custom(self, event: dict[str, Any]) -> list[Event]:
        name = _str(event.get("name"))
        value = event.get("value")
        if name in (RAW_INTERRUPT_NAME, LANGGRAPH_INTERRUPT):
            self.saw_interrupt = True
            return [langgraph_interrupt(value)]
        return [MetaEvent(name=name, value=value)]


_HANDLERS = {
    "TEXT_MESSAGE_START": AguiEventMapper._text_start,
    "TEXT_MESSAGE_CONTENT": AguiEventMapper._text_content,
    "TEXT_MESSAGE_END": AguiEventMapper._text_end,
    "TEXT_MESSAGE_CHUNK": AguiEventMapper._text_chunk,
    "TOOL_CALL_START": AguiEventMapper._call_start,
    "TOOL_CALL_ARGS": AguiEventMapper._call_args,
    "TOOL_CALL_END": AguiEventMapper._call_end,
    "TOOL_CALL_CHUNK": AguiEventMapper._call_chunk,
    "TOOL_CALL_RESULT": AguiEventMapper._call_result,
    "STATE_SNAPSHOT": AguiEventMapper._state_snapshot,
    "STATE_DELTA": AguiEventMapper._state_delta,
    "STEP_STARTED": AguiEventMapper._step,
    "STEP_FINISHED": AguiEventMapper._step,
    "RUN_STARTED": AguiEventMapper._run_started,
    "RUN_FINISHED": AguiEventMapper._run_finished,
    "RUN_ERROR": AguiEventMapper._run_error,
    "CUSTOM": AguiEventMapper._custom,
}
