"""``generateCopilotResponse``: start a turn and expose its events as GraphQL objects.

Both ways of serving the mutation start the turn here (``start_v1_turn``). The client's fixed
document is then encoded by ``fastpath``; any other document goes through the general executor
and the resolver below, whose objects' streamed and deferred fields read from queues fed by
one pump task (the object renderer of the shared v1 walk, ``graphql/v1_translation.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import strawberry
from strawberry import UNSET

from copilot_runtime.conf import disconnect_policy
from copilot_runtime.events import (
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    MetaEvent,
    TextStart,
)
from copilot_runtime.events.request import TurnRequest
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.input_conversion import input_to_dict
from copilot_runtime.graphql.turn_input import parse_generate_input, v1_history
from copilot_runtime.graphql.types.inputs import GenerateCopilotResponseInput
from copilot_runtime.graphql.types.responses import (
    CopilotResponse,
    ExtensionsResponse,
    OpenAIApiAssistantAPIResponse,
)
from copilot_runtime.graphql.types.scalars import JSONObject
from copilot_runtime.graphql.types.v1_objects import (
    action_message,
    agent_state_message,
    interrupt_meta_event,
    message_status,
    response_status,
    result_message,
    text_message,
)
from copilot_runtime.graphql.v1_translation import V1Translation
from copilot_runtime.history import KnownHistory
from copilot_runtime.runs.start import StartedTurn, turn_start

_END = object()
# Lower-cased, as RuntimeContext.headers holds them.
CLOUD_PUBLIC_API_KEY_HEADER = "x-copilotcloud-public-api-key"


async def start_v1_turn(
    *,
    context: RuntimeContext,
    data: dict[str, Any],
    properties: dict[str, Any] | None,
    history: KnownHistory | None = None,
) -> tuple[StartedTurn, TurnRequest]:
    """``history``: the known history of ``data``'s very messages, entered already (the fast
    path's); else the history enters here."""
    if history is None or history.raws is not data.get("messages"):
        user = context.user
        history = v1_history(data, user.pk if user.is_authenticated else None)
    request = parse_generate_input(data, properties, history)
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


class _Pump(V1Translation):
    """The object renderer of the v1 walk: dispatches the run's events to the queues and
    futures the GraphQL objects read (a message's handle is its chunk queue and status)."""

    def __init__(self, started: StartedTurn) -> None:
        super().__init__()
        self.started = started
        self.messages: asyncio.Queue[Any] = asyncio.Queue()
        self.meta_events: asyncio.Queue[Any] = asyncio.Queue()
        self.status: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def run(self) -> None:
        try:
            while (event := await self.started.events.get()) is not None:
                if self.feed(event):
                    return
        finally:
            # The events stopped without a finish (the turn's queue closed, or this task was
            # cancelled): the response ends as a stopped run.
            self.cancelled = self.cancelled or not self.finished
            self.finish()

    @staticmethod
    def _handle() -> tuple[asyncio.Queue[Any], asyncio.Future[Any]]:
        return asyncio.Queue(), asyncio.get_running_loop().create_future()

    def open_text(self, event: TextStart) -> tuple[asyncio.Queue[Any], asyncio.Future[Any]]:
        chunks, status = handle = self._handle()
        self.messages.put_nowait(text_message(event, content=_drain(chunks), status=status))
        return handle

    def open_action(self, event: ActionStart) -> tuple[asyncio.Queue[Any], asyncio.Future[Any]]:
        chunks, status = handle = self._handle()
        self.messages.put_nowait(action_message(event, arguments=_drain(chunks), status=status))
        return handle

    def chunk(self, handle: tuple[asyncio.Queue[Any], asyncio.Future[Any]], delta: str) -> None:
        handle[0].put_nowait(delta)

    def close(
        self, handle: tuple[asyncio.Queue[Any], asyncio.Future[Any]], reason: str | None
    ) -> None:
        chunks, status = handle
        chunks.put_nowait(_END)
        if not status.done():
            status.set_result(message_status(reason))

    def result(self, event: ActionResult) -> None:
        self.messages.put_nowait(result_message(event))

    def agent_state(self, event: AgentStateSnapshot) -> None:
        self.messages.put_nowait(agent_state_message(event))

    def interrupt(self, event: MetaEvent) -> None:
        meta = interrupt_meta_event(name=event.name, value=event.value, data=event.data)
        if meta is not None:
            self.meta_events.put_nowait(meta)

    def respond(self, status: dict[str, Any]) -> None:
        if not self.status.done():
            self.status.set_result(response_status(status))
        # Closing the lists here is safe: finish() closes the open messages' own streams next.
        self.messages.put_nowait(_END)
        self.meta_events.put_nowait(_END)


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
    info: strawberry.Info[RuntimeContext, None],
    data: GenerateCopilotResponseInput,
    properties: JSONObject | None = UNSET,
) -> CopilotResponse:
    """The mutation under the general executor (any document but the client's own)."""
    return await generate_copilot_response(
        context=info.context,
        data=input_to_dict(data),
        properties=properties if properties is not UNSET else None,
    )


async def generate_copilot_response(
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
