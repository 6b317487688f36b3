"""Starting a turn: record the request, create the run, hand it to the executor.

Protocol surfaces (the GraphQL resolver, later the AG-UI views and websocket subscriptions)
call ``turn_start`` and then watch the run; they never touch the engine directly.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from conversations.models import RunStatus
from conversations.services.runs import RunOutcome, Usage, new_run_id
from conversations.store import PreparedTurn, turn_store
from conversations.store.types import Progress, TurnRecord
from copilot_runtime.engine.agent_host import agent_host
from copilot_runtime.engine.hooks import (
    RequestHookContext,
    before_request_configured,
    call_before_request,
)
from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.events import Event
from copilot_runtime.events.request import (
    TurnRequest,
    check_turn_request,
    message_for_hooks,
)
from copilot_runtime.history import ThreadKey
from copilot_runtime.runs.executor import (
    CELERY,
    enqueue_run,
    executor_kind,
    placement_of,
    request_in_task,
    run_cancel,
    start_inline,
    watch_remote,
)
from copilot_runtime.runs.inbox import Inbox
from copilot_runtime.runs.reaper import runs_reap_stale
from copilot_runtime.runs.task_history import (
    CarriedTask,
    run_keeps,
    task_carried,
    task_placement,
)

logger = logging.getLogger(__name__)

# How long an inline turn's answer waits for its run's first event (``turn_start``).
RUN_HEAD_START_SECONDS = 0.05
# A run whose task could not be queued (the broker down): recorded failed with this code.
BROKER_UNAVAILABLE = "BROKER_UNAVAILABLE"
QUEUE_UNAVAILABLE_MESSAGE = "The runtime's task queue is unavailable; try again shortly."


@dataclass(frozen=True)
class StartedTurn:
    run_id: str
    thread_id: str
    # Registered before the run starts, so the caller sees every event; None at the end.
    events: Inbox[Event | None]
    # Stop watching (the run goes on).
    detach: Callable[[], None]
    # The client's messages that were new to the thread (v2 echoes only those in RUN_STARTED).
    new_message_ids: tuple[str, ...] = ()

    async def cancel(self) -> bool:
        return await run_cancel(run_id=self.run_id)


def check_agent_runnable(*, agent_name: str) -> None:
    """AGENT_NOT_FOUND for an unknown agent, CONFIGURATION_ERROR for one whose settings
    cannot run (the agent host checks each kind's)."""
    agent_host().check_runnable(agent_name)


def agent_state_from_client(request: TurnRequest) -> dict[str, Any] | None:
    """The state the client sent for the turn's agent (its view wins, as in CopilotKit)."""
    for entry in request.agent_states:
        if entry.get("agentName") == request.agent_name and entry.get("state"):
            try:
                sent = orjson.loads(entry["state"])
            except orjson.JSONDecodeError:
                break
            if isinstance(sent, dict) and sent:
                return sent
    return None


def _turn_record(
    *,
    user: AbstractBaseUser | AnonymousUser,
    request: TurnRequest,
    protocol: str,
    run_id: str | None,
) -> tuple[TurnRecord, dict[str, Any] | None]:
    check_turn_request(request, run_id=run_id)
    check_agent_runnable(agent_name=request.agent_name)
    client_state = agent_state_from_client(request)
    record = TurnRecord(
        thread_id=request.thread_id or str(uuid.uuid4()),
        user=user,
        agent_name=request.agent_name,
        protocol=protocol,
        request_type=request.request_type,
        previous_run_id=request.previous_run_id or "",
        messages=request.messages,
        run_id=run_id or new_run_id(),
        want_state=client_state is None,
        history=request.history,
    )
    return record, client_state


def _decide_state(
    request: TurnRequest,
    latest_state: dict[str, Any] | None,
    client_state: dict[str, Any] | None,
) -> None:
    """The agent's state at the start of the turn: the client's, else the latest stored."""
    request.state = client_state if client_state is not None else dict(latest_state or {})


def _finish_preparation(
    request: TurnRequest, prepared: PreparedTurn, client_state: dict[str, Any] | None
) -> None:
    _decide_state(request, prepared.latest_state, client_state)
    request.thread_pk = prepared.thread_pk  # the caller's own thread (its id is per owner)


class _RunPayload:
    """What the worker executes: the request with its starting state. Built once (when the
    store learns the thread's latest state) and carried by the task, by reference to the
    thread's history (engine/task_history.py); the run keeps its interrupt answers
    (``run_request_record``) and what its task carried of the history, for later tasks."""

    def __init__(
        self,
        request: TurnRequest,
        client_state: dict[str, Any] | None,
        *,
        thread: ThreadKey,
        run_id: str,
    ) -> None:
        self._request = request
        self._client_state = client_state
        self.thread = thread
        self._run_id = run_id
        self.carried: CarriedTask | None = None

    def __call__(self, latest_state: dict[str, Any] | None) -> dict[str, Any] | None:
        _decide_state(self._request, latest_state, self._client_state)
        self.carried = task_carried(self._request, thread=self.thread, run_id=self._run_id)
        kept = run_request_record({"meta_events": self._request.meta_events})
        return run_keeps(kept, self.carried)

    def placement_part(self, prepared: PreparedTurn) -> dict[str, Any]:
        """The request's part of the task, once the turn is stored."""
        if self.carried is None:  # never so: the store asks for the payload before writing
            return request_in_task(self._request)
        return task_placement(
            self.carried, thread=self.thread, thread_pk=prepared.thread_pk, request=self._request
        )


def run_request_record(payload: dict[str, Any]) -> dict[str, Any] | None:
    """What a run keeps of its request: the interrupt answers it carried, which the inspector
    shows. The whole request (the thread's history) is not stored on the run: it was about a
    fifth of PostgreSQL's CPU per request in the celery shape, and grew with the thread (a
    Celery run also keeps what its task carried of the history, mostly the turn's new
    messages: engine/task_history.py)."""
    answers = payload.get("meta_events")
    return {"meta_events": answers} if answers else None


def _answers_kept(
    request: TurnRequest,
) -> Callable[[dict[str, Any] | None], dict[str, Any] | None] | None:
    """For a run executed here: what it keeps of its request, as a Celery run does (None when
    there is nothing to keep, the common case)."""
    if not request.meta_events:
        return None
    kept = run_request_record({"meta_events": request.meta_events})
    return lambda _latest_state: kept


def _reap_stale(run_ids: list[str]) -> int:
    return runs_reap_stale(run_ids=run_ids)


async def turn_prepare(
    *,
    user: AbstractBaseUser | AnonymousUser,
    request: TurnRequest,
    protocol: str,
    run_id: str | None = None,
    start_running: bool = False,
    start_before_stored: bool = False,
) -> PreparedTurn:
    """The first half of ``turn_start``: check the request and the agent, then record the
    thread, the client's new messages and a pending run in one store round trip (under the
    celery executor, also queue the run on a worker). The run is not executed here.

    ``start_running`` records it running at once, for the inline executor that starts it in
    this process next (one round trip fewer than marking it afterwards).
    ``start_before_stored`` (with ``start_running``) returns once the thread has been read,
    the write still in flight on ``PreparedTurn.stored``, which the caller must await."""
    prepared, placement = await _turn_stored(
        user=user,
        request=request,
        protocol=protocol,
        run_id=run_id,
        start_running=start_running,
        start_before_stored=start_before_stored,
    )
    if placement is not None:
        await _enqueue(prepared, placement)
    return prepared


async def _enqueue(prepared: PreparedTurn, placement: dict[str, Any]) -> None:
    """Queue the stored run on a worker. A broker that cannot take it fails the run at once,
    so its thread is free again (not busy until the reaper finds a run nobody executes), and
    the caller gets the protocol's clear error."""
    try:
        await enqueue_run(run_id=prepared.run_id, placement=placement)
    except Exception as exc:
        logger.error("queueing run %s failed: %s", prepared.run_id, exc)
        await _record_not_started(
            prepared, error_code=BROKER_UNAVAILABLE, message=QUEUE_UNAVAILABLE_MESSAGE
        )
        raise CopilotKitError(QUEUE_UNAVAILABLE_MESSAGE, code=ErrorCode.NETWORK_ERROR) from exc


def _failed_before_start(error_code: str, message: str) -> Progress:
    return Progress(
        events=[],
        messages=[],
        agent_states=[],
        outcome=RunOutcome(
            status=RunStatus.FAILED,
            usage=Usage(),
            error_code=error_code,
            error_details={"message": message},
        ),
    )


async def _record_not_started(prepared: PreparedTurn, *, error_code: str, message: str) -> None:
    """Record a stored run that never started as failed; if even that fails, the reaper ends
    it once it is stale."""
    try:
        await turn_store().record(
            run_id=prepared.run_id,
            thread_pk=prepared.thread_pk,
            progress=_failed_before_start(error_code, message),
        )
    except Exception:
        logger.exception("recording run %s as failed failed too", prepared.run_id)


async def _turn_stored(
    *,
    user: AbstractBaseUser | AnonymousUser,
    request: TurnRequest,
    protocol: str,
    run_id: str | None,
    start_running: bool,
    start_before_stored: bool,
) -> tuple[PreparedTurn, dict[str, Any] | None]:
    """``turn_prepare`` up to queueing the run: the prepared turn, and under the celery
    executor the task's placement."""
    # An agent a remote endpoint announced is found here (the lookups below are synchronous).
    await agent_host().resolve(request.agent_name)
    record, client_state = _turn_record(
        user=user, request=request, protocol=protocol, run_id=run_id
    )
    record.executor = executor_kind()
    celery = record.executor == CELERY
    record.start_running = start_running and not celery
    record.start_before_stored = record.start_running and start_before_stored
    run_payload = None
    if celery:
        owner = user.pk if user.is_authenticated else None
        thread = (owner, record.thread_id)
        run_payload = _RunPayload(request, client_state, thread=thread, run_id=record.run_id)
    record.request_payload_for = run_payload or _answers_kept(request)
    prepared = await turn_store().prepare(turn=record, reap=_reap_stale)
    _finish_preparation(request, prepared, client_state)
    if run_payload is None:
        return prepared, None
    # The task carries what the worker needs (the request, where the thread's messages
    # continue): it starts the run without reading it back.
    return prepared, placement_of(prepared, request, carried=run_payload.placement_part(prepared))


async def turn_start(
    *,
    user: AbstractBaseUser | AnonymousUser,
    request: TurnRequest,
    protocol: str,
    run_id: str | None = None,
) -> StartedTurn:
    """Prepare the run and hand it to the executor; its events arrive on ``events``.

    ``run_id`` is the client's own run id (v2 clients mint them; the caller validates it).
    """
    celery = executor_kind() == CELERY
    hooked = before_request_configured()
    prepared, placement = await _turn_stored(
        user=user,
        request=request,
        protocol=protocol,
        run_id=run_id,
        start_running=not celery,
        # Inline, the run starts while the turn's write is in flight: the model works on
        # the request during that round trip. Not with a hook to call first (it may record
        # the run's failure, which needs the run stored), and not under a client's own run id
        # (v2): only the write proves it unused, and a run started under a taken one would
        # take the place of the live run that has it (its live fan-out, its heartbeat).
        start_before_stored=not hooked and run_id is None,
    )
    try:
        if hooked:
            await call_before_request(
                RequestHookContext(
                    thread_id=prepared.thread_id,
                    run_id=prepared.run_id,
                    input_messages=[message_for_hooks(m) for m in request.messages],
                    properties=request.properties,
                    url=request.frontend_url,
                )
            )
    except Exception as exc:
        await turn_store().record(
            run_id=prepared.run_id,
            thread_pk=prepared.thread_pk,
            progress=_failed_before_start("BEFORE_REQUEST_HOOK_FAILED", str(exc)),
        )
        raise CopilotKitError(
            "The request was refused by the runtime's on_before_request hook.",
            code=ErrorCode.UNKNOWN,
        ) from exc
    if celery:
        # In the run's group before it is queued (once the hook has let the request through:
        # a worker must never start a run the hook refuses).
        following = await watch_remote(prepared.run_id, joined_before_queued=placement is not None)
        events, detach = following.events, following.detach
        if placement is not None:
            if following.reply_to is not None:
                placement["reply_to"] = following.reply_to
            try:
                await _enqueue(prepared, placement)
            except BaseException:
                detach()
                raise
    else:
        live, events = start_inline(
            run_id=prepared.run_id,
            thread_id=prepared.thread_id,
            request=request,
            prepared=prepared,
        )

        def detach() -> None:
            live.unwatch(events)

        try:
            # The run goes first, up to its first event: the chat engine's comes just before
            # the model request goes out, so the model works on it while this request's answer
            # starts (headers, the first payload), not after. A run slow to say anything
            # (a remote agent) holds the answer back no longer than the bound.
            await events.arrival(within=RUN_HEAD_START_SECONDS)
            if prepared.stored is not None:
                # The turn's write went on meanwhile. If it failed (a request that raced this
                # one onto the thread: ThreadBusy), the run stops and stores nothing, and this
                # request is answered with the error, as if the preparation had failed.
                await asyncio.shield(prepared.stored)
        except BaseException:
            detach()
            raise

    return StartedTurn(
        run_id=prepared.run_id,
        thread_id=prepared.thread_id,
        events=events,
        detach=detach,
        new_message_ids=prepared.new_message_ids,
    )
