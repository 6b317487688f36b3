"""``run``, ``connect``, ``stop`` and ``suggest``: v2 runs on the same engine and store as v1.

A v2 run is a ``Run`` like any other (protocol ``agui``): recorded by ``turn_start``, executed by
the configured executor, persisted, visible in the admin and to ``loadAgentState``. It keeps the
client's ``runId``. Refusals before the stream starts are JSON errors; everything that happens
once the run exists is in the stream (an upstream failure is ``RUN_ERROR`` with HTTP 200, as the
TypeScript runtime answers). A dropped stream follows ``ON_DISCONNECT["agui"]`` (``continue``:
the run finishes and persists, and the client re-attaches with ``connect``); ``stop`` cancels.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse

from agents.registry import AgentSpec
from agents.remote.announced import agent_resolve
from agents.turns import agent_turn_events
from conversations.selectors import active_run_ids_for_caller, run_exists, thread_get_for_caller
from conversations.services.runs import new_run_id
from conversations.store.health import db_sync_to_async
from copilot_runtime.adapters import adapter_from_settings
from copilot_runtime.agui import responses
from copilot_runtime.agui.echo import echoed_input
from copilot_runtime.agui.encoder import SseEncoder
from copilot_runtime.agui.generation import input_from_1_0, speaks_1_0
from copilot_runtime.agui.headers import forwardable_headers
from copilot_runtime.agui.replay import cursor_parse, replay_stream, thread_history
from copilot_runtime.agui.run_input import (
    InvalidRunInput,
    RunInput,
    agui_history,
    issues_text,
    run_input_parse,
    turn_request_from_run_input,
    without_system_messages,
)
from copilot_runtime.agui.stop_answers import (
    StopAnswer,
    stop_answer_pending,
    stop_answer_wait,
)
from copilot_runtime.auth import Caller
from copilot_runtime.conf import disconnect_policy
from copilot_runtime.engine.chat import ChatTurn, chat_turn_events
from copilot_runtime.errors import AgentNotFoundError, CopilotKitError
from copilot_runtime.events import Event, RunError, RunFinished
from copilot_runtime.events.request import TurnRequest
from copilot_runtime.history import BodyRead
from copilot_runtime.http.responses import LastChunk, json_response
from copilot_runtime.runs.executor import run_cancel
from copilot_runtime.runs.start import StartedTurn, check_agent_runnable, turn_start

logger = logging.getLogger(__name__)

PROTOCOL = "agui"
STOPPED_INTERRUPT = {"type": "RUN_ERROR", "message": "Run stopped by user", "code": "STOPPED"}
# A suggestion is one forced tool call: one model call is all it needs.
SUGGEST_MAX_ITERATIONS = 1


async def agent_known(agent_id: str) -> bool:
    return await agent_spec(agent_id) is not None


async def agent_spec(agent_id: str) -> AgentSpec | None:
    try:
        return await agent_resolve(agent_id)
    except AgentNotFoundError:
        return None


def _turn_request(
    run_input: RunInput, agent: AgentSpec, *, frontend_url: str | None = None
) -> TurnRequest:
    request = turn_request_from_run_input(
        run_input, agent_name=agent.name, frontend_url=frontend_url
    )
    if not agent.forwards_system_messages:
        # A caller's system message must not rewrite a built-in agent's instructions.
        request.messages = without_system_messages(request.messages, request.history)
    return request


def _parse(
    body: Any, caller: Caller, read: BodyRead | None = None, *, keep: bool = True
) -> RunInput | HttpResponse:
    """The run input, its history entering with it (``read``: what the front door's reading
    of the body's bytes told of it; ``keep=False``: a request that stores nothing)."""
    user = caller.user
    owner_id = user.pk if user.is_authenticated else None
    if speaks_1_0(body):
        restated = input_from_1_0(body)
        if restated is not body:
            body, read = restated, None  # the bytes read no longer describe these messages
    history = agui_history(body, owner_id, read, keep=keep)
    try:
        return run_input_parse(body, history)
    except InvalidRunInput as invalid:
        return responses.invalid_body(issues_text(invalid.issues))


def _frontend_url(request: HttpRequest) -> str | None:
    return request.headers.get("Referer") or request.headers.get("Origin") or None


# --- run --------------------------------------------------------------------------------------


async def _run_events(
    started: StartedTurn, echo: dict[str, Any], encoder: SseEncoder
) -> AsyncIterator[bytes]:
    """The run's SSE stream; ``echo`` is the input RUN_STARTED echoes (not kept past it: the
    request's history is not held while the model streams)."""
    inbox = started.events
    complete = False
    try:
        started_chunk = encoder.start(echo)
        del echo
        yield started_chunk
        while True:
            batch = await inbox.take()
            chunk = encoder.encode(batch)
            # The stream ends when the run has: once its end is stored (``RunFinished``, or the
            # end of its events), not at the terminal event on the wire. A RUN_ERROR goes out
            # before the run's end is stored, and a client following up as soon as its stream
            # ends must not find the thread still busy. Nothing is encoded after the terminal
            # event.
            last = batch[-1] is None or any(type(event) is RunFinished for event in batch)
            if stop_answer_pending(started.run_id):
                # Its stop is being answered: that answer goes out first (stop_answers.py).
                await stop_answer_wait(started.run_id)
            if chunk:
                yield LastChunk(chunk) if last else chunk
            if last:
                break
        complete = True
    finally:
        started.detach()
        if not complete and disconnect_policy(PROTOCOL) == "cancel":
            await started.cancel()


async def handle_run(
    *,
    request: HttpRequest,
    caller: Caller,
    agent_id: str,
    body: Any,
    read: BodyRead | None = None,
) -> HttpResponse:
    agent = await agent_spec(agent_id)
    if agent is None:
        return responses.agent_not_found(agent_id)
    parsed = _parse(body, caller, read)
    if isinstance(parsed, HttpResponse):
        return parsed
    turn_request = _turn_request(parsed, agent, frontend_url=_frontend_url(request))
    turn_request.forwarded_headers = forwardable_headers(request.headers)
    try:
        started = await turn_start(
            user=caller.user, request=turn_request, protocol=PROTOCOL, run_id=parsed.run_id
        )
    except CopilotKitError as error:
        return responses.refused(error)
    except IntegrityError:
        # The client's run id is the run's primary key: a taken one fails its insert (checked
        # here rather than by a query before every run). Saying so would confirm that someone's
        # run has that id, and refusing would let a caller squat ids others will mint: the
        # run goes ahead under an id of the server's, which RUN_STARTED announces.
        if not await db_sync_to_async(run_exists)(run_id=parsed.run_id):
            raise
        try:
            started = await turn_start(
                user=caller.user, request=turn_request, protocol=PROTOCOL, run_id=new_run_id()
            )
        except CopilotKitError as error:
            return responses.refused(error)
    encoder = SseEncoder(
        thread_id=started.thread_id,
        run_id=started.run_id,
        state_deltas=True,
        client_state=parsed.state if isinstance(parsed.state, dict) else None,
        protocol_1_0=speaks_1_0(parsed.raw),
    )
    echo = echoed_input(parsed.raw, started.new_message_ids, parsed.history)
    return responses.sse_response(_run_events(started, echo, encoder))


# --- connect ----------------------------------------------------------------------------------


async def handle_connect(*, caller: Caller, agent_id: str, body: Any) -> HttpResponse:
    if not await agent_known(agent_id):
        return responses.agent_not_found(agent_id)
    parsed = _parse(body, caller, keep=False)
    if isinstance(parsed, HttpResponse):
        return parsed
    cursor = cursor_parse(parsed.raw.get("lastSeenEventId"))

    def load() -> Any:
        thread = thread_get_for_caller(thread_id=parsed.thread_id, user=caller.user)
        if thread is None:
            return None
        return thread_history(thread=thread, cursor=cursor)

    history = await db_sync_to_async(load)()
    if history is None or history.is_empty:
        # Unknown thread (or someone else's): an empty stream, as the TypeScript runtime does.
        return responses.sse_response(_empty())
    return responses.sse_response(replay_stream(history, protocol_1_0=speaks_1_0(parsed.raw)))


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover - makes this an async generator


# --- stop -------------------------------------------------------------------------------------


async def handle_stop(*, caller: Caller, agent_id: str, thread_id: str, body: Any) -> HttpResponse:
    if not await agent_known(agent_id):
        return responses.agent_not_found(agent_id)
    run_id = body.get("runId") if isinstance(body, dict) else None
    run_ids = await db_sync_to_async(active_run_ids_for_caller)(
        user=caller.user, thread_id=thread_id, run_id=run_id if isinstance(run_id, str) else None
    )
    if not run_ids:
        return json_response(_not_stopped(thread_id))
    # From here until this answer is sent, the streams of these runs hold their bytes: the
    # client hears that its stop worked before it sees its run end, as from TypeScript.
    answer = StopAnswer(tuple(run_ids))
    try:
        stopped = False
        for active in run_ids:
            stopped = await run_cancel(run_id=active) or stopped
    except BaseException:
        answer.drop()
        raise
    if not stopped:
        return answer.response(_not_stopped(thread_id))
    return answer.response({"stopped": True, "interrupt": STOPPED_INTERRUPT})


def _not_stopped(thread_id: str) -> dict[str, Any]:
    return {"stopped": False, "message": f"No active run for thread '{thread_id}'."}


# --- suggest ----------------------------------------------------------------------------------


async def _suggest_events(
    events: AsyncIterator[Event], run_input: RunInput
) -> AsyncIterator[bytes]:
    """The turn's events, straight from the engine: no run, no thread, nothing stored."""
    encoder = SseEncoder(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        protocol_1_0=speaks_1_0(run_input.raw),
    )
    yield encoder.start(run_input.raw)
    try:
        async for event in events:
            chunk = encoder.encode([event])
            if chunk:
                yield chunk
        failed = False
    except Exception:
        logger.exception("suggestion run failed")
        failed = True
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()  # the client went away: the upstream request is closed
    if failed:
        yield encoder.encode([RunError(message="The suggestion run failed.", code="UNKNOWN")])
    yield encoder.encode([RunFinished()])


async def handle_suggest(*, caller: Caller, agent_id: str, body: Any) -> HttpResponse:
    agent = await agent_spec(agent_id)
    if agent is None:
        return responses.agent_not_found(agent_id)
    parsed = _parse(body, caller, keep=False)
    if isinstance(parsed, HttpResponse):
        return parsed
    try:
        check_agent_runnable(agent_name=agent_id)
    except CopilotKitError as error:
        return responses.refused(error)
    request = _turn_request(parsed, agent)
    if isinstance(parsed.state, dict):
        request.state = dict(parsed.state)
    adapter = adapter_from_settings(agent_id)
    events = agent_turn_events(request=request, adapter=adapter)
    if events is None:  # the chat engine: no server actions, one model call
        events = chat_turn_events(
            ChatTurn(
                request=request,
                adapter=adapter,
                server_actions={},
                max_iterations=SUGGEST_MAX_ITERATIONS,
            )
        )
    return responses.sse_response(_suggest_events(events, parsed))
