"""Canonical events -> the 2022 incremental payloads of the client's fixed mutation.

The byte shape follows what the TypeScript runtime (graphql-yoga) sends for the same
document: every streamed item carries its absolute index in ``path``, ``__typename`` is
answered wherever urql asked for it, and statuses arrive as deferred ``data`` patches. Events
already waiting in the queue are folded into one payload, and consecutive deltas of one message
into one ``items`` entry, so a fast model costs a handful of writes instead of one per token.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    MetaEvent,
    RunError,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.graphql.v1_rules import (
    COPILOTKIT_INTERRUPT,
    INTERRUPT_ALIASES,
    LANGGRAPH_INTERRUPT,
    ROOT,
    SUCCESS_MESSAGE_STATUS,
    SUCCESS_RESPONSE_STATUS,
    failed_response_status,
    interrupt_message_item,
    iso_now,
    meta_text,
    open_message_failure_reason,
)


def initial_payload(
    *, thread_id: str, run_id: str | None, extensions: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "data": {
            ROOT: {
                "threadId": thread_id,
                "runId": run_id,
                "extensions": _extensions(extensions),
                "messages": [],
                "metaEvents": [],
                "__typename": "CopilotResponse",
            }
        },
        "hasNext": True,
    }


def _extensions(extensions: dict[str, Any] | None) -> dict[str, Any] | None:
    if not extensions:
        return None
    assistant = extensions.get("openaiAssistantAPI")
    return {
        "openaiAssistantAPI": None
        if assistant is None
        else {
            "runId": assistant.get("runId"),
            "threadId": assistant.get("threadId"),
            "__typename": "OpenAIApiAssistantAPIResponse",
        },
        "__typename": "ExtensionsResponse",
    }


@dataclass
class _Stream:
    """One open streamed list: a message's ``content`` or ``arguments``."""

    index: int  # the message's index in ``messages``
    field: str  # "content" or "arguments"
    typename: str
    sent: int = 0  # items sent so far, i.e. the next item's index


@dataclass
class V1Encoder:
    """Stateful: feed it batches of events, get one payload per batch."""

    messages_sent: int = 0
    meta_events_sent: int = 0
    open_streams: dict[str, _Stream] = field(default_factory=dict)
    error: RunError | None = None
    cancelled: bool = False

    def encode(self, events: list[Event]) -> tuple[list[dict[str, Any]], bool]:
        """The ``incremental`` entries for ``events``, and whether the run has finished."""
        entries: list[dict[str, Any]] = []
        finished = False
        for event in events:
            kind = type(event)
            if kind is TextDelta or kind is ActionArgs:
                key = event.message_id if kind is TextDelta else event.action_execution_id
                stream = self.open_streams.get(key)
                if stream is None:
                    continue
                last = entries[-1] if entries else None
                if last is not None and last.get("_stream") is stream:
                    last["items"].append(event.delta)
                else:
                    entries.append(
                        {
                            "items": [event.delta],
                            "path": [ROOT, "messages", stream.index, stream.field, stream.sent],
                            "_stream": stream,
                        }
                    )
                stream.sent += 1
            elif kind is TextStart:
                entries.append(self._item(self._text_item(event)))
                self.open_streams[event.message_id] = _Stream(
                    self.messages_sent - 1, "content", "TextMessageOutput"
                )
            elif kind is ActionStart:
                entries.append(self._item(self._action_item(event)))
                self.open_streams[event.action_execution_id] = _Stream(
                    self.messages_sent - 1, "arguments", "ActionExecutionMessageOutput"
                )
            elif kind is TextEnd:
                self._close(entries, event.message_id, SUCCESS_MESSAGE_STATUS)
            elif kind is ActionEnd:
                self._close(entries, event.action_execution_id, SUCCESS_MESSAGE_STATUS)
            elif kind is ActionResult:
                entries.append(self._item(self._result_item(event)))
                entries.append(self._status(self.messages_sent - 1, "ResultMessageOutput"))
            elif kind is AgentStateSnapshot:
                entries.append(self._item(self._agent_state_item(event)))
                entries.append(self._status(self.messages_sent - 1, "AgentStateMessageOutput"))
            elif kind is MetaEvent:
                entries.extend(self._meta_event_entries(event))
            elif kind is RunError:
                self.error = event
            elif kind is RunFinished:
                self.cancelled = event.status == "cancelled"
                entries.extend(self._finish())
                finished = True
        for entry in entries:
            entry.pop("_stream", None)
        return entries, finished

    def _item(self, item: dict[str, Any]) -> dict[str, Any]:
        entry = {"items": [item], "path": [ROOT, "messages", self.messages_sent]}
        self.messages_sent += 1
        return entry

    @staticmethod
    def _status(index: int, typename: str, status: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "data": {"status": status or SUCCESS_MESSAGE_STATUS, "__typename": typename},
            "path": [ROOT, "messages", index],
        }

    def _close(self, entries: list[dict[str, Any]], key: str, status: dict[str, Any]) -> None:
        stream = self.open_streams.pop(key, None)
        if stream is not None:
            entries.append(self._status(stream.index, stream.typename, status))

    def _finish(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        reason = open_message_failure_reason(self.error, cancelled=self.cancelled)
        failed = {"code": "Failed", "reason": reason, "__typename": "FailedMessageStatus"}
        for key in list(self.open_streams):
            self._close(entries, key, failed)
        if self.error is not None:
            status = failed_response_status(self.error)
        elif self.cancelled:
            status = failed_response_status(
                RunError(message="The run was stopped.", code="CANCELLED")
            )
        else:
            status = SUCCESS_RESPONSE_STATUS
        entries.insert(
            0, {"data": {"status": status, "__typename": "CopilotResponse"}, "path": [ROOT]}
        )
        return entries

    @staticmethod
    def _text_item(event: TextStart) -> dict[str, Any]:
        return {
            "__typename": "TextMessageOutput",
            "id": event.message_id,
            "createdAt": iso_now(),
            "content": [],
            "role": event.role,
            "parentMessageId": event.parent_message_id,
        }

    @staticmethod
    def _action_item(event: ActionStart) -> dict[str, Any]:
        return {
            "__typename": "ActionExecutionMessageOutput",
            "id": event.action_execution_id,
            "createdAt": iso_now(),
            "name": event.action_name,
            "arguments": [],
            "parentMessageId": event.parent_message_id,
        }

    @staticmethod
    def _result_item(event: ActionResult) -> dict[str, Any]:
        return {
            "__typename": "ResultMessageOutput",
            "id": f"result-{event.action_execution_id}",
            "createdAt": iso_now(),
            "result": event.result,
            "actionExecutionId": event.action_execution_id,
            "actionName": event.action_name,
        }

    @staticmethod
    def _agent_state_item(event: AgentStateSnapshot) -> dict[str, Any]:
        return {
            "__typename": "AgentStateMessageOutput",
            "id": f"ck-{uuid.uuid4()}",
            "createdAt": iso_now(),
            "threadId": event.thread_id,
            "state": orjson.dumps(event.state).decode(),
            "running": event.running,
            "agentName": event.agent_name,
            "nodeName": event.node_name,
            "runId": event.run_id,
            "active": event.active,
            "role": event.role,
        }

    def _meta_event_entries(self, event: MetaEvent) -> list[dict[str, Any]]:
        """Interrupts go in ``metaEvents``, as in the TypeScript runtime; other meta events
        (an AG-UI custom event, a LangGraph exit) stay in the run's log only."""
        name = INTERRUPT_ALIASES.get(event.name, event.name)
        index = self.meta_events_sent
        path = [ROOT, "metaEvents", index]
        if name == LANGGRAPH_INTERRUPT:
            item = {
                "type": "MetaEvent",
                "name": name,
                "value": meta_text(event.value),
                "__typename": name,
            }
            entries = [{"items": [item], "path": path}]
        elif name == COPILOTKIT_INTERRUPT:
            data = event.data or {}
            messages = [m for m in data.get("messages") or [] if isinstance(m, dict)]
            items = [interrupt_message_item(message) for message in messages]
            item = {
                "type": "MetaEvent",
                "name": name,
                "data": {
                    "messages": [entry for entry, _ in items],
                    "value": meta_text(data.get("value")),
                    "__typename": "CopilotKitLangGraphInterruptEventData",
                },
                "__typename": name,
            }
            entries = [{"items": [item], "path": path}]
            # The messages' statuses are deferred fragments: patches after the item.
            entries.extend(
                {
                    "data": {"status": SUCCESS_MESSAGE_STATUS, "__typename": typename},
                    "path": [*path, "data", "messages", position],
                }
                for position, (_, typename) in enumerate(items)
            )
        else:
            return []
        self.meta_events_sent += 1
        return entries


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()
