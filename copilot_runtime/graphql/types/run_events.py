"""``RunEventPayload``: one entry of a run's event log, as the subscriptions deliver it.

A subscription yields one payload per *logged* event (``RunEvent``), so ``sequence`` is the
log's own number: a client that lost its connection re-attaches with ``runEvents(runId,
afterSequence: <last sequence seen>)`` and gets exactly what it missed. Consecutive deltas are
coalesced in the log, so a ``delta`` may hold several model tokens.

``RunEventPayloads`` builds the payloads of one stream: it remembers the run's last error, so
the ``run_finished`` payload can carry the same ``ResponseStatus`` the v1 mutation answers.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import strawberry

from conversations.services.runs import LoggedEvent
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    MetaEvent,
    RunError,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.graphql.interrupts import interrupt_meta_event
from copilot_runtime.graphql.types.enums import (
    FailedResponseStatusReason,
    MessageRole,
)
from copilot_runtime.graphql.types.messages import (
    ActionExecutionMessageOutput,
    AgentStateMessageOutput,
    BaseMessageOutput,
    ResultMessageOutput,
    TextMessageOutput,
)
from copilot_runtime.graphql.types.meta_events import (
    BaseMetaEvent,
    LangGraphInterruptEvent,
)
from copilot_runtime.graphql.types.scalars import JSON
from copilot_runtime.graphql.types.statuses import (
    FailedResponseStatus,
    PendingMessageStatus,
    ResponseStatus,
    SuccessMessageStatus,
    SuccessResponseStatus,
)
from copilot_runtime.graphql.v1_rules import failed_response_status

CANCELLED_ERROR = RunError(message="The run was stopped.", code="CANCELLED")
FAILED_WITHOUT_ERROR = RunError(message="The run failed.", code="UNKNOWN")

_TYPE_DESCRIPTION = (
    "The canonical event type: text_start, text_delta, text_end, action_start, action_args, "
    "action_end, action_result, agent_state, meta_event, generation_start, generation_end, "
    "run_error or run_finished."
)


@strawberry.type(
    description=(
        "One event of a run, in the order of the run's durable event log. `sequence` numbers "
        "are consecutive from 1: resume a stream with `runEvents(runId, afterSequence)`. A run "
        "ends with exactly one `run_finished` event, whose `status` is the run's outcome."
    )
)
class RunEventPayload:
    sequence: int = strawberry.field(
        description="The event's position in the run's log (1, 2, 3, ...; never repeated)."
    )
    event_type: str = strawberry.field(name="type", description=_TYPE_DESCRIPTION)
    thread_id: str = strawberry.field(description="The thread the run belongs to.")
    run_id: str = strawberry.field(description="The run's id (pass it to `stopRun`).")
    message_id: str | None = strawberry.field(
        default=None,
        description=(
            "The message the event belongs to: a text message, an action execution (tool "
            "call) or, for action_result, the result message."
        ),
    )
    delta: str | None = strawberry.field(
        default=None,
        description=(
            "text_delta: a fragment of the message's text; action_args: a fragment of the "
            "action's JSON arguments. Append fragments in sequence order."
        ),
    )
    message: BaseMessageOutput | None = strawberry.field(
        default=None,
        description=(
            "text_start, action_start, action_result and agent_state: the message as "
            "generateCopilotResponse would list it. `content`/`arguments` hold the chunks "
            "known when the event was logged (none for a start): the deltas follow."
        ),
    )
    meta_event: BaseMetaEvent | None = strawberry.field(
        default=None, description="meta_event: the meta event (e.g. a LangGraph interrupt)."
    )
    status: ResponseStatus | None = strawberry.field(
        default=None,
        description=(
            "run_finished: the run's outcome, as generateCopilotResponse's `status` "
            "(FailedResponseStatus with reason and details when it failed or was stopped)."
        ),
    )
    error: str | None = strawberry.field(
        default=None, description="run_error: the error's message."
    )
    raw: JSON = strawberry.field(description="The event's payload exactly as it was logged.")


# Looks up the error of a run whose run_error was logged before the stream started.
ErrorLookup = Callable[[], Awaitable[RunError | None]]


@dataclass
class RunEventPayloads:
    """Builds the payloads of one stream of a run's log (stateful: feed events in order)."""

    run_id: str
    thread_id: str
    # The run's error, read from the log when the stream did not see its run_error.
    lookup_error: ErrorLookup | None = None
    error: RunError | None = None

    async def build(self, logged: LoggedEvent) -> RunEventPayload:
        payload = RunEventPayload(
            sequence=logged.seq,
            event_type=logged.type,
            thread_id=self.thread_id,
            run_id=self.run_id,
            raw=logged.payload,
        )
        data = logged.payload
        kind = logged.type
        if kind in (TextDelta.type, ActionArgs.type):
            payload.message_id = data.get("message_id") or data.get("action_execution_id")
            payload.delta = data.get("delta")
        elif kind == TextStart.type:
            payload.message_id = data["message_id"]
            payload.message = _text_message(data)
        elif kind == TextEnd.type:
            payload.message_id = data["message_id"]
        elif kind == ActionStart.type:
            payload.message_id = data["action_execution_id"]
            payload.message = _action_message(data)
        elif kind == ActionEnd.type:
            payload.message_id = data["action_execution_id"]
        elif kind == ActionResult.type:
            payload.message_id = _result_message_id(data["action_execution_id"])
            payload.message = _result_message(data)
        elif kind == AgentStateSnapshot.type:
            payload.message = _agent_state_message(data, state_id=f"{self.run_id}:{logged.seq}")
            payload.message_id = payload.message.id
        elif kind == MetaEvent.type:
            payload.meta_event = _meta_event(data)
        elif kind == RunError.type:
            self.error = RunError(**data)
            payload.error = self.error.message
        elif kind == RunFinished.type:
            payload.status = await self._final_status(str(data.get("status") or ""))
        return payload

    async def _final_status(self, run_status: str) -> ResponseStatus:
        if run_status == "succeeded":
            return SuccessResponseStatus()
        error = self.error
        if error is None and run_status != "cancelled" and self.lookup_error is not None:
            error = await self.lookup_error()
        if error is None:
            error = CANCELLED_ERROR if run_status == "cancelled" else FAILED_WITHOUT_ERROR
        # Imported here: the fastpath package imports the schema, which imports this module.

        wire = failed_response_status(error)
        return FailedResponseStatus(
            reason=FailedResponseStatusReason[wire["reason"]], details=wire["details"]
        )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _result_message_id(action_execution_id: str) -> str:
    # The id the engine stores the result message under (and the v1 mutation answers).
    return f"result-{action_execution_id}"


def _text_message(data: dict[str, Any]) -> TextMessageOutput:
    return TextMessageOutput(
        id=data["message_id"],
        created_at=_now(),
        role=MessageRole(data.get("role") or "assistant"),
        parent_message_id=data.get("parent_message_id"),
        content_source=[],
        status_source=PendingMessageStatus(),
    )


def _action_message(data: dict[str, Any]) -> ActionExecutionMessageOutput:
    return ActionExecutionMessageOutput(
        id=data["action_execution_id"],
        created_at=_now(),
        name=data["action_name"],
        parent_message_id=data.get("parent_message_id"),
        arguments_source=[],
        status_source=PendingMessageStatus(),
    )


def _result_message(data: dict[str, Any]) -> ResultMessageOutput:
    return ResultMessageOutput(
        id=_result_message_id(data["action_execution_id"]),
        created_at=_now(),
        action_execution_id=data["action_execution_id"],
        action_name=data["action_name"],
        result=data["result"],
        status_source=SuccessMessageStatus(),
    )


def _agent_state_message(data: dict[str, Any], *, state_id: str) -> AgentStateMessageOutput:
    return AgentStateMessageOutput(
        id=state_id,
        created_at=_now(),
        thread_id=data["thread_id"],
        agent_name=data["agent_name"],
        node_name=data.get("node_name") or "",
        run_id=data.get("run_id") or "",
        active=bool(data.get("active", True)),
        role=MessageRole(data.get("role") or "assistant"),
        # JSON text, as in generateCopilotResponse (the client parses it itself).
        state=orjson.dumps(data.get("state") or {}).decode(),
        running=bool(data.get("running", True)),
        status_source=SuccessMessageStatus(),
    )


def _meta_event(data: dict[str, Any]) -> BaseMetaEvent:
    """An interrupt as every v1 path builds it (copilot_runtime/graphql/interrupts.py); any
    other meta event keeps its value, as a LangGraphInterruptEvent-shaped payload."""
    built = interrupt_meta_event(
        name=str(data.get("name") or ""), value=data.get("value"), data=data.get("data")
    )
    if built is not None:
        return built
    value = data.get("value")
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return LangGraphInterruptEvent(value=text)
