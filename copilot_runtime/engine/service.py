"""Starting a turn: record the request, create the run, hand it to the executor.

Protocol surfaces (the GraphQL resolver, later the AG-UI views and websocket subscriptions)
call ``turn_start`` and then watch the run; they never touch the engine directly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction

from agents.registry import agent_get
from conversations.models import RunStatus, Thread
from conversations.selectors import agent_state_latest
from conversations.services.messages import messages_sync_input
from conversations.services.runs import Usage, check_thread_not_busy, run_create, run_finish
from conversations.services.threads import thread_get_or_create_for_turn
from copilot_runtime.engine.executor import (
    CELERY,
    executor_kind,
    run_cancel,
    schedule_on_worker,
    start_inline,
    watch_remote,
)
from copilot_runtime.engine.hooks import RequestHookContext, call_before_request
from copilot_runtime.engine.reaper import runs_reap_stale
from copilot_runtime.engine.request import TurnRequest, turn_request_to_payload
from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.events import Event


@dataclass(frozen=True)
class PreparedTurn:
    run_id: str
    thread_id: str


@dataclass(frozen=True)
class StartedTurn:
    run_id: str
    thread_id: str
    # Registered before the run starts, so the caller sees every event; None at the end.
    events: asyncio.Queue[Event | None]
    # Stop watching (the run goes on).
    detach: Callable[[], None]

    async def cancel(self) -> bool:
        return await run_cancel(run_id=self.run_id)


def check_agent_runnable(*, agent_name: str) -> None:
    """AGENT_NOT_FOUND for an unknown agent, CONFIGURATION_ERROR for one whose settings
    cannot run (agents/runners checks each kind's)."""
    from agents.runners import check_agent_runnable as check_agent_settings

    check_agent_settings(agent_get(agent_name))


def agent_state_for_turn(*, thread: Thread, request: TurnRequest) -> dict[str, Any]:
    """The agent's state at the start of the turn: the latest persisted snapshot, unless the
    client sent the agent's state itself (its view wins, as in CopilotKit)."""
    for entry in request.agent_states:
        if entry.get("agentName") == request.agent_name and entry.get("state"):
            try:
                sent = orjson.loads(entry["state"])
            except orjson.JSONDecodeError:
                break
            if isinstance(sent, dict) and sent:
                return sent
    latest = agent_state_latest(thread=thread, agent_name=request.agent_name)
    return dict(latest.state) if latest is not None else {}


@transaction.atomic
def turn_prepare(
    *,
    user: AbstractBaseUser | AnonymousUser,
    request: TurnRequest,
    protocol: str,
    run_id: str | None = None,
) -> PreparedTurn:
    """Record the thread, the client's messages and a pending run, in one transaction."""
    check_agent_runnable(agent_name=request.agent_name)
    thread_id = request.thread_id or str(uuid.uuid4())
    thread = thread_get_or_create_for_turn(
        thread_id=thread_id, user=user, agent_name=request.agent_name
    )
    check_thread_not_busy(thread=thread, reap=runs_reap_stale)
    run = run_create(
        thread=thread,
        agent_name=request.agent_name,
        protocol=protocol,
        request_type=request.request_type,
        previous_run_id=request.previous_run_id,
        run_id=run_id,
    )
    messages_sync_input(thread=thread, messages=request.messages, run=run)
    request.state = agent_state_for_turn(thread=thread, request=request)
    if executor_kind() == CELERY:
        run.request_payload = turn_request_to_payload(request)
        run.save(update_fields=["request_payload"])
        schedule_on_worker(run_id=run.id)
    return PreparedTurn(run_id=run.id, thread_id=thread_id)


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
    prepared = await sync_to_async(turn_prepare)(
        user=user, request=request, protocol=protocol, run_id=run_id
    )
    try:
        await call_before_request(
            RequestHookContext(
                thread_id=prepared.thread_id,
                run_id=prepared.run_id,
                input_messages=[dataclasses.asdict(m) for m in request.messages],
                properties=request.properties,
                url=request.frontend_url,
            )
        )
    except Exception as exc:
        await sync_to_async(run_finish)(
            run_id=prepared.run_id,
            status=RunStatus.FAILED,
            usage=Usage(),
            error_code="BEFORE_REQUEST_HOOK_FAILED",
            error_details={"message": str(exc)},
        )
        raise CopilotKitError(
            "The request was refused by the runtime's on_before_request hook.",
            code=ErrorCode.UNKNOWN,
        ) from exc
    if executor_kind() == CELERY:
        events, detach = watch_remote(prepared.run_id)
    else:
        live, events = start_inline(
            run_id=prepared.run_id, thread_id=prepared.thread_id, request=request
        )

        def detach() -> None:
            live.unwatch(events)

    return StartedTurn(
        run_id=prepared.run_id, thread_id=prepared.thread_id, events=events, detach=detach
    )
