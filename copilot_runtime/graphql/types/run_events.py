"""``RunEventPayload``: one entry of a run's event log, as the subscriptions deliver it.

A subscription yields one payload per *logged* event (``RunEvent``), so ``sequence`` is the
log's own number: a client that lost its connection re-attaches with ``runEvents(runId,
afterSequence: <last sequence seen>)`` and gets exactly what it missed. Consecutive deltas are
coalesced in the log, so a ``delta`` may hold several model tokens.

``RunEventPayloads`` builds the payloads of one stream: it remembers the run's last error, so
the ``run_finished`` payload can carry the same ``ResponseStatus`` the v1 mutation answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

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
    event_from_payload,
    result_message_id,
)
from copilot_runtime.graphql.types.messages import BaseMessageOutput
from copilot_runtime.graphql.types.meta_events import BaseMetaEvent, LangGraphInterruptEvent
from copilot_runtime.graphql.types.scalars import JSON
from copilot_runtime.graphql.types.statuses import PendingMessageStatus, ResponseStatus
from copilot_runtime.graphql.types.v1_objects import (
    action_message,
    agent_state_message,
    interrupt_meta_event,
    response_status,
    result_message,
    text_message,
)
from copilot_runtime.graphql.v1_rules import (
    SUCCESS_RESPONSE_STATUS,
    final_response_status,
    meta_text,
)

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
            return payload
        event = event_from_payload(kind, data)
        # The message lists hold what was known when the event was logged: the deltas follow.
        match event:
            case TextStart():
                payload.message_id = event.message_id
                payload.message = text_message(event, content=[], status=PendingMessageStatus())
            case TextEnd():
                payload.message_id = event.message_id
            case ActionStart():
                payload.message_id = event.action_execution_id
                payload.message = action_message(event, arguments=[], status=PendingMessageStatus())
            case ActionEnd():
                payload.message_id = event.action_execution_id
            case ActionResult():
                payload.message_id = result_message_id(event.action_execution_id)
                payload.message = result_message(event)
            case AgentStateSnapshot():
                # The log's position makes the id stable across replays.
                payload.message = agent_state_message(
                    event, message_id=f"{self.run_id}:{logged.seq}"
                )
                payload.message_id = payload.message.id
            case MetaEvent():
                payload.meta_event = _meta_event(event)
            case RunError():
                self.error = event
                payload.error = event.message
            case RunFinished():
                payload.status = await self._final_status(event.status)
        return payload

    async def _final_status(self, run_status: str) -> ResponseStatus:
        if run_status == "succeeded":
            return response_status(SUCCESS_RESPONSE_STATUS)
        error = self.error
        if error is None and run_status != "cancelled" and self.lookup_error is not None:
            error = await self.lookup_error()
        if error is None and run_status != "cancelled":
            error = FAILED_WITHOUT_ERROR
        return response_status(final_response_status(error, cancelled=True))


def _meta_event(event: MetaEvent) -> BaseMetaEvent:
    """An interrupt as every v1 path builds it (``v1_objects``); the log also holds other meta
    events, and this stream shows them too, as a LangGraphInterruptEvent-shaped payload."""
    built = interrupt_meta_event(name=event.name, value=event.value, data=event.data)
    if built is not None:
        return built
    return LangGraphInterruptEvent(value=meta_text(event.value))
