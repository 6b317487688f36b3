"""Canonical events -> the 2022 incremental payloads of the client's fixed mutation.

The byte shape follows what the TypeScript runtime (graphql-yoga) sends for the same
document: every streamed item carries its absolute index in ``path``, ``__typename`` is
answered wherever urql asked for it, and statuses arrive as deferred ``data`` patches. Events
already waiting in the queue are folded into one payload, and consecutive deltas of one message
into one ``items`` entry, so a fast model costs a handful of writes instead of one per token.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from copilot_runtime.events import (
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    MetaEvent,
    TextStart,
    result_message_id,
)
from copilot_runtime.graphql.v1_rules import (
    COPILOTKIT_INTERRUPT,
    INTERRUPT_ALIASES,
    LANGGRAPH_INTERRUPT,
    ROOT,
    SUCCESS_MESSAGE_STATUS,
    interrupt_message_item,
    iso_now,
    meta_text,
)
from copilot_runtime.graphql.v1_translation import V1Translation


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


class V1Encoder(V1Translation):
    """The wire renderer of the v1 walk: feed it batches of events, get one payload each."""

    def __init__(self) -> None:
        super().__init__()
        self.messages_sent = 0
        self.meta_events_sent = 0
        self._entries: list[dict[str, Any]] = []
        # The entry the last chunk went to, while nothing else has been appended since.
        self._last_chunk: tuple[_Stream, dict[str, Any]] | None = None

    def encode(self, events: list[Event]) -> tuple[list[dict[str, Any]], bool]:
        """The ``incremental`` entries for ``events``, and whether the run has finished."""
        self._entries = entries = []
        self._last_chunk = None
        finished = False
        for event in events:
            if self.feed(event):
                finished = True
                break
        self._last_chunk = None
        return entries, finished

    def _append(self, entry: dict[str, Any]) -> None:
        self._entries.append(entry)
        self._last_chunk = None

    def open_text(self, event: TextStart) -> _Stream:
        self._append(self._item(self._text_item(event)))
        return _Stream(self.messages_sent - 1, "content", "TextMessageOutput")

    def open_action(self, event: ActionStart) -> _Stream:
        self._append(self._item(self._action_item(event)))
        return _Stream(self.messages_sent - 1, "arguments", "ActionExecutionMessageOutput")

    def chunk(self, handle: _Stream, delta: str) -> None:
        # Consecutive deltas of one message fold into one ``items`` entry.
        last = self._last_chunk
        if last is not None and last[0] is handle:
            last[1]["items"].append(delta)
        else:
            entry = {
                "items": [delta],
                "path": [ROOT, "messages", handle.index, handle.field, handle.sent],
            }
            self._entries.append(entry)
            self._last_chunk = (handle, entry)
        handle.sent += 1

    def close(self, handle: _Stream, reason: str | None) -> None:
        status = (
            SUCCESS_MESSAGE_STATUS
            if reason is None
            else {"code": "Failed", "reason": reason, "__typename": "FailedMessageStatus"}
        )
        self._append(self._status(handle.index, handle.typename, status))

    def result(self, event: ActionResult) -> None:
        self._append(self._item(self._result_item(event)))
        self._append(self._status(self.messages_sent - 1, "ResultMessageOutput"))

    def agent_state(self, event: AgentStateSnapshot) -> None:
        self._append(self._item(self._agent_state_item(event)))
        self._append(self._status(self.messages_sent - 1, "AgentStateMessageOutput"))

    def interrupt(self, event: MetaEvent) -> None:
        for entry in self._meta_event_entries(event):
            self._append(entry)

    def respond(self, status: dict[str, Any]) -> None:
        self._append({"data": {"status": status, "__typename": "CopilotResponse"}, "path": [ROOT]})

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
            "id": result_message_id(event.action_execution_id),
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
        """Interrupts go in ``metaEvents``, as in the TypeScript runtime."""
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
