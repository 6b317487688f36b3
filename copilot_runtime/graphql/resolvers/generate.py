"""``generateCopilotResponse``: start a turn and expose its events as GraphQL objects.

Both ways of serving the mutation start the turn here (``start_v1_turn``). The client's fixed
document is then encoded by ``fastpath``; any other document goes through the general executor
with the objects built below, whose streamed and deferred fields read from queues fed by one
pump task.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

from copilot_runtime.conf import disconnect_policy
from copilot_runtime.engine.service import StartedTurn, turn_start
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
from copilot_runtime.events.request import TurnRequest
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.interrupts import agent_state_message, interrupt_meta_event
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.graphql.types.enums import FailedResponseStatusReason, MessageRole
from copilot_runtime.graphql.types.messages import (
    ActionExecutionMessageOutput,
    ResultMessageOutput,
    TextMessageOutput,
)
from copilot_runtime.graphql.types.responses import (
    CopilotResponse,
    ExtensionsResponse,
    OpenAIApiAssistantAPIResponse,
)
from copilot_runtime.graphql.types.statuses import (
    FailedMessageStatus,
    FailedResponseStatus,
    SuccessMessageStatus,
    SuccessResponseStatus,
)
from copilot_runtime.graphql.v1_rules import (
    failed_response_status,
    open_message_failure_reason,
)

_END = object()
# Lower-cased, as RuntimeContext.headers holds them.
CLOUD_PUBLIC_API_KEY_HEADER = "x-copilotcloud-public-api-key"


async def start_v1_turn(
    *, context: RuntimeContext, data: dict[str, Any], properties: dict[str, Any] | None
) -> tuple[StartedTurn, TurnRequest]:
    request = parse_generate_input(data, properties)
    request.cloud_public_api_key = context.headers.get(CLOUD_PUBLIC_API_KEY_HEADER, "")
    started = await turn_start(user=context.user, request=request, protocol="graphql")
    return started, request


async def cancel_on_disconnect(started: StartedTurn) -> None:
    """A v1 client's only stop signal is the abort, so a dropped stream cancels by default."""
    started.detach()
    if disconnect_policy("graphql") == "cancel":
        await started.cancel()


async def _drain(queue: asyncio.Queue[Any]) -> AsyncIterator[Any]:
    while (item := await queue.get()) is not _END:
        yield item


class _Pump:
    """Dispatches the run's events to the queues and futures the GraphQL objects read."""

    def __init__(self, started: StartedTurn) -> None:
        loop = asyncio.get_running_loop()
        self.started = started
        self.messages: asyncio.Queue[Any] = asyncio.Queue()
        self.meta_events: asyncio.Queue[Any] = asyncio.Queue()
        self.status: asyncio.Future[Any] = loop.create_future()
        self._chunks: dict[str, asyncio.Queue[Any]] = {}
        self._statuses: dict[str, asyncio.Future[Any]] = {}
        self.finished = False

    def _open(self, key: str) -> tuple[asyncio.Queue[Any], asyncio.Future[Any]]:
        chunks: asyncio.Queue[Any] = asyncio.Queue()
        status: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._chunks[key] = chunks
        self._statuses[key] = status
        return chunks, status

    def _close(self, key: str, status: Any) -> None:
        chunks = self._chunks.pop(key, None)
        if chunks is not None:
            chunks.put_nowait(_END)
        future = self._statuses.pop(key, None)
        if future is not None and not future.done():
            future.set_result(status)

    async def run(self) -> None:
        error: RunError | None = None
        try:
            while (event := await self.started.events.get()) is not None:
                if isinstance(event, RunError):
                    error = event
                elif isinstance(event, RunFinished):
                    self._finish(error, cancelled=event.status == "cancelled")
                    return
                else:
                    self._dispatch(event)
        finally:
            if not self.finished:
                self._finish(error, cancelled=True)

    def _dispatch(self, event: Event) -> None:
        now = dt.datetime.now(dt.UTC)
        if isinstance(event, TextStart):
            chunks, status = self._open(event.message_id)
            self.messages.put_nowait(
                TextMessageOutput(
                    id=event.message_id,
                    created_at=now,
                    role=MessageRole(event.role),
                    parent_message_id=event.parent_message_id,
                    content_source=_drain(chunks),
                    status_source=status,
                )
            )
        elif isinstance(event, TextDelta | ActionArgs):
            key = event.message_id if isinstance(event, TextDelta) else event.action_execution_id
            if (chunks := self._chunks.get(key)) is not None:
                chunks.put_nowait(event.delta)
        elif isinstance(event, TextEnd):
            self._close(event.message_id, SuccessMessageStatus())
        elif isinstance(event, ActionStart):
            chunks, status = self._open(event.action_execution_id)
            self.messages.put_nowait(
                ActionExecutionMessageOutput(
                    id=event.action_execution_id,
                    created_at=now,
                    name=event.action_name,
                    parent_message_id=event.parent_message_id,
                    arguments_source=_drain(chunks),
                    status_source=status,
                )
            )
        elif isinstance(event, ActionEnd):
            self._close(event.action_execution_id, SuccessMessageStatus())
        elif isinstance(event, ActionResult):
            self.messages.put_nowait(
                ResultMessageOutput(
                    id=f"result-{event.action_execution_id}",
                    created_at=now,
                    action_execution_id=event.action_execution_id,
                    action_name=event.action_name,
                    result=event.result,
                    status_source=SuccessMessageStatus(),
                )
            )
        elif isinstance(event, AgentStateSnapshot):
            self.messages.put_nowait(agent_state_message(event))
        elif isinstance(event, MetaEvent):
            meta = interrupt_meta_event(name=event.name, value=event.value, data=event.data)
            if meta is not None:  # other meta events stay in the run's log only
                self.meta_events.put_nowait(meta)

    def _finish(self, error: RunError | None, *, cancelled: bool) -> None:
        self.finished = True
        reason = open_message_failure_reason(error, cancelled=cancelled)
        for key in list(self._chunks):
            self._close(key, FailedMessageStatus(reason=reason))
        self.messages.put_nowait(_END)
        self.meta_events.put_nowait(_END)
        if self.status.done():
            return
        if error is None and not cancelled:
            self.status.set_result(SuccessResponseStatus())
            return
        wire = failed_response_status(
            error or RunError(message="The run was stopped.", code="CANCELLED")
        )
        self.status.set_result(
            FailedResponseStatus(
                reason=FailedResponseStatusReason[wire["reason"]], details=wire["details"]
            )
        )


def _extensions(extensions: dict[str, Any] | None) -> ExtensionsResponse | None:
    if not extensions:
        return None
    assistant = extensions.get("openaiAssistantAPI")
    return ExtensionsResponse(
        openai_assistant_api=None
        if assistant is None
        else OpenAIApiAssistantAPIResponse(
            run_id=assistant.get("runId"), thread_id=assistant.get("threadId")
        )
    )


async def resolve_generate_copilot_response(
    *, context: RuntimeContext, data: dict[str, Any], properties: dict[str, Any] | None
) -> CopilotResponse:
    started, request = await start_v1_turn(context=context, data=data, properties=properties)
    pump = _Pump(started)
    pump_task = asyncio.create_task(pump.run())

    async def messages() -> AsyncIterator[Any]:
        try:
            async for message in _drain(pump.messages):
                yield message
        finally:
            if not pump.finished:
                await cancel_on_disconnect(started)
                pump_task.cancel()

    return CopilotResponse(
        thread_id=started.thread_id,
        run_id=started.run_id,
        extensions=_extensions(request.extensions),
        status_source=pump.status,
        messages_source=messages(),
        meta_events_source=_drain(pump.meta_events),
    )
