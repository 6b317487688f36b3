"""Canonical events -> the 2022 incremental payloads of the client's fixed mutation.

The byte shape follows what the TypeScript runtime (graphql-yoga) sends for the same
document: every streamed item carries its absolute index in ``path``, ``__typename`` is
answered wherever urql asked for it, and statuses arrive as deferred ``data`` patches. Events
already waiting in the queue are folded into one payload, and consecutive deltas of one message
into one ``items`` entry, so a fast model costs a handful of writes instead of one per token.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

from copilot_runtime.errors import ErrorCode
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

ROOT = "generateCopilotResponse"
STREAM_ERROR_REASON = "Error streaming message content"
CANCELLED_REASON = "The run was stopped before this message finished."

_SUCCESS_MESSAGE_STATUS = {"code": "Success", "__typename": "SuccessMessageStatus"}
_SUCCESS_RESPONSE_STATUS = {"code": "Success", "__typename": "SuccessResponseStatus"}

# What the client should make of a run error (react-core maps originalError.code).
_CLIENT_CODES = {
    "UPSTREAM_UNREACHABLE": ErrorCode.NETWORK_ERROR,
    "UPSTREAM_TIMEOUT": ErrorCode.NETWORK_ERROR,
}


def iso_now() -> str:
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


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


# Run errors meaning the stream itself was cut (its executor died), not the model failing.
_INTERRUPTED_CODES = frozenset({"WORKER_LOST"})


def failed_response_status(error: RunError) -> dict[str, Any]:
    if error.code in _INTERRUPTED_CODES:
        return {
            "code": "Failed",
            "__typename": "FailedResponseStatus",
            "reason": "MESSAGE_STREAM_INTERRUPTED",
            "details": {"description": error.message, "code": error.code},
        }
    client_code = _CLIENT_CODES.get(error.code, ErrorCode.UNKNOWN)
    return {
        "code": "Failed",
        "__typename": "FailedResponseStatus",
        "reason": "UNKNOWN_ERROR",
        "details": {
            "description": error.message,
            "code": error.code,
            **error.details,
            "originalError": {
                "code": client_code.value,
                "message": error.message,
                "severity": "critical",
                "visibility": "toast",
            },
        },
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
                self._close(entries, event.message_id, _SUCCESS_MESSAGE_STATUS)
            elif kind is ActionEnd:
                self._close(entries, event.action_execution_id, _SUCCESS_MESSAGE_STATUS)
            elif kind is ActionResult:
                entries.append(self._item(self._result_item(event)))
                entries.append(self._status(self.messages_sent - 1, "ResultMessageOutput"))
            elif kind is AgentStateSnapshot:
                entries.append(self._item(self._agent_state_item(event)))
                entries.append(self._status(self.messages_sent - 1, "AgentStateMessageOutput"))
            elif kind is MetaEvent:
                entries.append(
                    {
                        "items": [self._meta_event_item(event)],
                        "path": [ROOT, "metaEvents", self.meta_events_sent],
                    }
                )
                self.meta_events_sent += 1
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
            "data": {"status": status or _SUCCESS_MESSAGE_STATUS, "__typename": typename},
            "path": [ROOT, "messages", index],
        }

    def _close(self, entries: list[dict[str, Any]], key: str, status: dict[str, Any]) -> None:
        stream = self.open_streams.pop(key, None)
        if stream is not None:
            entries.append(self._status(stream.index, stream.typename, status))

    def _finish(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = []
        reason = CANCELLED_REASON if self.cancelled else STREAM_ERROR_REASON
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
            status = _SUCCESS_RESPONSE_STATUS
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

    @staticmethod
    def _meta_event_item(event: MetaEvent) -> dict[str, Any]:
        return {
            "type": "MetaEvent",
            "name": event.name,
            "value": event.value if isinstance(event.value, str) else _json(event.value),
            "__typename": event.name,
        }


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()
