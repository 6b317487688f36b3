"""The two generations of AG-UI a v2 route serves: 0.0.59 (today's clients) and 1.0.

CopilotKit's clients up to 1.75 ship ``@ag-ui/client`` 0.0.59 and send no ``protocolVersion``;
they get exactly what ``translate.py`` writes. A client that declares ``protocolVersion``
``"1.<minor>"`` (or a later major: the 1.0 specification says a consumer treats a newer
declaration as the newest it knows) gets the 1.0 restatement below, chosen once per request:

- ``RUN_STARTED`` declares ``protocolVersion: "1.0"`` (the producer's own version);
- ``RUN_FINISHED`` carries ``outcome`` (``success`` with the tool calls the run left for the
  client in ``pendingToolCallIds``, ``interrupt`` with ``interrupts[]``, ``cancelled`` for a
  stopped run) and no ``finishReason``: 1.0 closes the event, so the reason goes in its
  ``metadata`` (the specification's place for what it does not model);
- ``RUN_ERROR`` names no ``threadId``/``runId`` (1.0 does not define them there);
- a meta event that pauses the run (an interrupt) is kept as ``CUSTOM`` and becomes one of the
  interrupts of the run's outcome;
- each ``usage[]`` entry counts the input written to the prompt cache
  (``cacheWriteInputTokens``);
- ``connect`` restates the finished runs as one run: ``MESSAGES_SNAPSHOT`` and
  ``STATE_SNAPSHOT`` (``replay.py``).

On the way in, a 1.0 tool message may carry its result as content parts: its text parts are
joined into the string the rest of the runtime reads. ``resume[]`` entries (``interruptId``,
``status``, ``payload``) are answered as the ``resume`` of 0.0.59 is (``run_input.py``); a
``cancelled`` entry answers nothing.
"""

from __future__ import annotations

import re
from typing import Any

from agents.interrupts import INTERRUPT_EVENT_NAMES, RAW_INTERRUPT_NAME
from copilot_runtime.agui.translate import (
    CUSTOM,
    REASONING_ENCRYPTED_VALUE,
    REASONING_MESSAGE_CONTENT,
    REASONING_MESSAGE_START,
    RUN_FINISHED,
    RUN_STARTED,
    TEXT_MESSAGE_CONTENT,
    TEXT_MESSAGE_START,
    TOOL_CALL_ARGS,
    TOOL_CALL_RESULT,
    TOOL_CALL_START,
    RunUsage,
    Translator,
)
from copilot_runtime.events import Event, MetaEvent, RunFinished

PROTOCOL_1_0 = "1.0"
# ``major.minor``, as the specification's versioning grammar has it.
_VERSION = re.compile(r"^(\d+)\.(\d+)$")
INTERRUPT_REASON = "input_required"
# The meta events an agent pauses with (agents/interrupts.py).
_INTERRUPT_NAMES = frozenset((*INTERRUPT_EVENT_NAMES, RAW_INTERRUPT_NAME))


def speaks_1_0(run_input: Any) -> bool:
    """Whether the client declared AG-UI 1.0 or later in its input's ``protocolVersion``."""
    version = run_input.get("protocolVersion") if isinstance(run_input, dict) else None
    if not isinstance(version, str):
        return False
    matched = _VERSION.match(version)
    return matched is not None and int(matched.group(1)) >= 1


def input_from_1_0(body: dict[str, Any]) -> dict[str, Any]:
    """A 1.0 input in the shape the parser reads: tool results given as content parts become
    their text. The body is returned as it is when nothing needs restating (most requests)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return body
    restated: list[Any] | None = None
    for index, message in enumerate(messages):
        if (
            isinstance(message, dict)
            and message.get("role") == "tool"
            and isinstance(message.get("content"), list)
        ):
            if restated is None:
                restated = list(messages)
            restated[index] = {**message, "content": _parts_text(message["content"])}
    return body if restated is None else {**body, "messages": restated}


def _parts_text(parts: list[Any]) -> str:
    return "".join(
        str(part.get("text") or "")
        for part in parts
        if isinstance(part, dict) and part.get("type") == "text"
    )


def resume_answer(entries: list[Any]) -> Any:
    """The answer a 1.0 ``resume[]`` gives to the run's interrupt: the first resolved entry's
    payload; None when every entry cancels (the run goes on without an answer)."""
    for entry in entries:
        if isinstance(entry, dict) and entry.get("status", "resolved") == "resolved":
            return entry.get("payload", entry.get("value"))
        if not isinstance(entry, dict):
            return entry
    return None


def run_started_1_0(event: dict[str, Any]) -> dict[str, Any]:
    return {**event, "protocolVersion": PROTOCOL_1_0}


class Translator10(Translator):
    """The 0.0.59 translation, restated for a 1.0 client (see the module's docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.usage = RunUsage(cache_writes=True)
        # Tool calls started and not answered in this run: what it leaves for the client.
        self.pending_calls: dict[str, None] = {}
        self.interrupts: list[dict[str, Any]] = []
        self.outcome_status: str | None = None

    def translate(self, event: Event) -> list[dict[str, Any]]:
        kind = type(event)
        if kind is RunFinished:
            self.outcome_status = event.status
        produced = super().translate(event)
        if kind is MetaEvent and produced and event.name in _INTERRUPT_NAMES:
            self.interrupts.append(self._interrupt(event))
        for out in produced:
            out_type = out["type"]
            if out_type == TOOL_CALL_START:
                self.pending_calls[out["toolCallId"]] = None
            elif out_type == TOOL_CALL_RESULT:
                self.pending_calls.pop(out["toolCallId"], None)
            elif out_type == CUSTOM and out.get("value") is None:
                out["value"] = ""  # CUSTOM.value is required, and a null is not a value
        return produced

    def _interrupt(self, event: MetaEvent) -> dict[str, Any]:
        data = event.data if isinstance(event.data, dict) else {}
        ids = data.get("interruptIds")
        given = ids[0] if isinstance(ids, list) and ids and isinstance(ids[0], str) else None
        interrupt: dict[str, Any] = {
            "id": given or f"{self.run_id}:interrupt:{len(self.interrupts)}",
            "reason": INTERRUPT_REASON,
        }
        value = event.value if event.value is not None else data.get("value")
        if isinstance(value, str) and value:
            interrupt["message"] = value
        return interrupt

    def finish(self) -> list[dict[str, Any]]:
        produced = super().finish()
        if produced:
            produced[-1] = self._finished(produced[-1])
        return produced

    def _finished(self, finished: dict[str, Any]) -> dict[str, Any]:
        reason = finished.pop("finishReason", None)
        finished["outcome"] = self.outcome()
        if reason is not None:
            finished["metadata"] = {"finishReason": reason}
        return finished

    def outcome(self) -> dict[str, Any]:
        """Why the run (so far) ended: what it left for the client, or that it was stopped."""
        if self.outcome_status == "cancelled":
            return {"type": "cancelled"}
        if self.interrupts:
            return {"type": "interrupt", "interrupts": self.interrupts}
        if self.pending_calls:
            return {"type": "success", "pendingToolCallIds": list(self.pending_calls)}
        return {"type": "success"}

    def error(self, *, message: str, code: str | None) -> list[dict[str, Any]]:
        produced = super().error(message=message, code=code)
        if produced:
            error = produced[-1]
            error.pop("threadId", None)
            error.pop("runId", None)
            if self.usage.entries:
                error["usage"] = self.usage.as_list()
        return produced


def last_run_outcome(*, thread_id: str, run_id: str, events: list[Event]) -> dict[str, Any]:
    """The 1.0 outcome of a replayed thread's last run, from its logged events as its live
    stream had it: what it left open (an interrupt, a frontend tool call), so a client
    reconnecting afterwards still knows. A run that failed left nothing to answer."""
    translator = Translator10(thread_id=thread_id, run_id=run_id)
    translator.translate_all(events)
    return translator.outcome()


def snapshot_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation a stream of AG-UI events builds, as a client applying them holds it:
    each run's input messages, then what it streamed (text, tool calls grouped into their
    assistant message, tool results, reasoning), in order."""
    messages: dict[str, dict[str, Any]] = {}
    calls: dict[str, dict[str, Any]] = {}

    def add(message: dict[str, Any]) -> dict[str, Any]:
        return messages.setdefault(message["id"], message)

    for event in events:
        kind = event["type"]
        if kind == RUN_STARTED:
            for message in (event.get("input") or {}).get("messages") or []:
                add(message)
        elif kind in (TEXT_MESSAGE_START, REASONING_MESSAGE_START):
            role = event.get("role") or "assistant"
            add({"id": event["messageId"], "role": role, "content": ""})
        elif kind in (TEXT_MESSAGE_CONTENT, REASONING_MESSAGE_CONTENT):
            message = messages.get(event["messageId"])
            if message is not None:
                message["content"] = message.get("content", "") + event["delta"]
        elif kind == REASONING_ENCRYPTED_VALUE and event.get("subtype") == "message":
            message = messages.get(event["entityId"])
            if message is not None:
                message["encryptedValue"] = event["encryptedValue"]
        elif kind == TOOL_CALL_START:
            call_id = event["toolCallId"]
            parent = add({"id": event.get("parentMessageId") or call_id, "role": "assistant"})
            function = {"name": event["toolCallName"], "arguments": ""}
            call = {"id": call_id, "type": "function", "function": function}
            parent.setdefault("toolCalls", []).append(call)
            calls[call_id] = call
        elif kind == TOOL_CALL_ARGS:
            call = calls.get(event["toolCallId"])
            if call is not None:
                call["function"]["arguments"] += event["delta"]
        elif kind == TOOL_CALL_RESULT:
            result = {"id": event["messageId"], "role": "tool", "content": event["content"]}
            add({**result, "toolCallId": event["toolCallId"]})
    return list(messages.values())


def finished_1_0(*, thread_id: str, run_id: str, outcome: dict[str, Any]) -> dict[str, Any]:
    return {"type": RUN_FINISHED, "threadId": thread_id, "runId": run_id, "outcome": outcome}
