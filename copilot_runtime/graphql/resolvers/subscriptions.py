"""Subscriptions: ``copilotStream`` (start a turn, stream it) and ``runEvents`` (attach to a run).

Both stream the run's durable event log through ``follow_run``: every payload carries the
log's sequence number, so what ``copilotStream`` delivered is exactly what ``runEvents``
replays, and a client that lost its socket resumes with ``runEvents(runId, afterSequence)``
without a gap or a duplicate.

Stopping. Strawberry cancels a subscription's generator both when the client completes the
operation (graphql-transport-ws ``complete``, legacy graphql-ws ``stop``) and when the socket
goes away, but for ``copilotStream`` these mean different things: a completion is the client's
stop button and cancels the run; a dropped connection follows ``ON_DISCONNECT["subscription"]``
(``continue`` by default: the run finishes and persists, and the client re-attaches with
``runEvents``). The websocket handlers (``copilot_runtime.ws.handlers``) tell them apart per
operation: each operation's task starts with its own ``SubscriptionEnd`` in the
``SUBSCRIPTION_END`` context variable, and the handler marks it when it handles the client's
``complete``/``stop`` for that operation id, before cancelling the task. A per-operation mark
is used rather than a "socket closed" flag because a client may stop and close at once
(subscriptions-transport-ws sends ``stop`` for every operation, then closes): the flag would
race with the cancellation, the mark cannot. Outside a websocket handler (no
``SubscriptionEnd``), closing the stream early is taken as an explicit stop.

Another caller's run and an unknown run get the same ``Run not found`` (``NOT_FOUND``) error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated

import strawberry
from strawberry import UNSET

from conversations.models import Run
from conversations.selectors import (
    run_ended_unlogged,
    run_get_for_caller,
    run_logged_error,
)
from conversations.store.health import db_sync_to_async
from copilot_runtime.conf import disconnect_policy
from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.events import RunError
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.input_conversion import input_to_dict
from copilot_runtime.graphql.turn_input import parse_generate_input, v1_history
from copilot_runtime.graphql.types.inputs import GenerateCopilotResponseInput
from copilot_runtime.graphql.types.run_events import RunEventPayload, RunEventPayloads
from copilot_runtime.graphql.types.scalars import JSONObject
from copilot_runtime.runs.executor import reap_if_stale_check, run_cancel
from copilot_runtime.runs.relay import follow_run
from copilot_runtime.runs.start import turn_start

logger = logging.getLogger(__name__)

# ``Run.protocol`` of the turns started by ``copilotStream``.
SUBSCRIPTION_PROTOCOL = "graphql-ws"
# The ON_DISCONNECT surface of subscriptions.
DISCONNECT_SURFACE = "subscription"


@dataclass
class SubscriptionEnd:
    """How one websocket operation ended: set when the client completed (stopped) it."""

    requested_by_client: bool = False


SUBSCRIPTION_END: ContextVar[SubscriptionEnd | None] = ContextVar("subscription_end", default=None)


class RunNotFound(CopilotKitError):
    """An unknown run, or one the caller may not see: answered exactly alike."""

    def __init__(self) -> None:
        super().__init__("Run not found", code=ErrorCode.NOT_FOUND)


class _RunEndedUnlogged(Exception):
    """The run ended without a ``run_finished`` in its log (refused before it executed)."""


async def visible_run(*, context: RuntimeContext, run_id: str) -> Run:
    run = await db_sync_to_async(run_get_for_caller)(run_id=run_id, user=context.user)
    if run is None:
        raise RunNotFound()
    return run


# --- streaming the log ----------------------------------------------------------------------


async def stream_run_log(
    *, run_id: str, thread_id: str, after_sequence: int = 0
) -> AsyncGenerator[RunEventPayload, None]:
    """Payloads for the run's logged events after ``after_sequence``, live, to its end."""
    reap_if_stale = reap_if_stale_check(run_id)

    async def check_alive() -> None:
        await reap_if_stale()
        if await db_sync_to_async(run_ended_unlogged)(run_id=run_id):
            raise _RunEndedUnlogged

    async def lookup_error() -> RunError | None:
        return await db_sync_to_async(run_logged_error)(run_id=run_id)

    payloads = RunEventPayloads(run_id=run_id, thread_id=thread_id, lookup_error=lookup_error)
    try:
        async for logged in follow_run(run_id, after_seq=after_sequence, check_alive=check_alive):
            yield await payloads.build(logged)
    except _RunEndedUnlogged:
        logger.info("run %s ended without a run_finished event; ending its stream", run_id)


async def _copilot_stream(
    *, run_id: str, thread_id: str, end: SubscriptionEnd | None
) -> AsyncGenerator[RunEventPayload, None]:
    finished = False
    try:
        async for payload in stream_run_log(run_id=run_id, thread_id=thread_id):
            yield payload
        finished = True
    finally:
        if not finished:
            await _on_stream_closed(run_id=run_id, end=end)


async def _on_stream_closed(*, run_id: str, end: SubscriptionEnd | None) -> None:
    explicit_stop = end is None or end.requested_by_client
    if explicit_stop or disconnect_policy(DISCONNECT_SURFACE) == "cancel":
        await run_cancel(run_id=run_id)
        logger.info("run %s stopped: its copilotStream subscription ended", run_id)
    else:
        logger.info("run %s continues after its subscriber's connection closed", run_id)


# --- resolvers ------------------------------------------------------------------------------


async def resolve_copilot_stream(
    info: strawberry.Info[RuntimeContext, None],
    data: GenerateCopilotResponseInput,
    properties: JSONObject | None = UNSET,
) -> AsyncGenerator[RunEventPayload, None]:
    # Read here, in the operation's own task: the generator may be closed from another one.
    end = SUBSCRIPTION_END.get()
    values = input_to_dict(data)
    user = info.context.user
    history = v1_history(values, user.pk if user.is_authenticated else None)
    request = parse_generate_input(values, properties if properties is not UNSET else None, history)
    # The preparation is shielded: a subscription completed while its turn is being prepared
    # must still see the run it started, to stop it (or let it go on, per ON_DISCONNECT).
    starting = asyncio.ensure_future(
        turn_start(user=info.context.user, request=request, protocol=SUBSCRIPTION_PROTOCOL)
    )
    try:
        started = await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            started = await starting
            started.detach()
            await _on_stream_closed(run_id=started.run_id, end=end)
        raise
    # The stream follows the log (whose sequence numbers runEvents replays), not the queue.
    started.detach()
    return _copilot_stream(run_id=started.run_id, thread_id=started.thread_id, end=end)


async def resolve_run_events(
    info: strawberry.Info[RuntimeContext, None],
    run_id: Annotated[
        str, strawberry.argument(description="The run's id (copilotStream's runId).")
    ],
    after_sequence: Annotated[
        int | None,
        strawberry.argument(
            description="The last sequence already received: only later events are sent."
        ),
    ] = 0,
) -> AsyncGenerator[RunEventPayload, None]:
    run = await visible_run(context=info.context, run_id=run_id)
    after = max(after_sequence or 0, 0)
    return stream_run_log(run_id=run.pk, thread_id=run.thread.thread_id, after_sequence=after)
