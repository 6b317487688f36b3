"""Executing one prepared run: the engine's events persisted, published, and finished.

This is the body every executor runs (an in-process task today; a Celery worker later). The
stream is never held up by the database: events are published at once and written by a
flusher in small batches (every ``EVENT_FLUSH_MS``; when followers elsewhere read the run
from its log, its first token is announced to them at once and written with the next batch).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import logging
from collections.abc import Callable
from typing import Any

from conversations.models import RunStatus
from conversations.services.runs import LoggedEvent, RunOutcome
from conversations.store import turn_store
from conversations.store.types import (
    PreparedTurn,
    Progress,
)
from copilot_runtime.adapters import adapter_from_settings
from copilot_runtime.conf import runtime_setting
from copilot_runtime.engine.agent_host import agent_host
from copilot_runtime.engine.chat import chat_turn_events, configured_chat_turn
from copilot_runtime.engine.hooks import (
    RequestHookContext,
    after_request_configured,
    call_after_request,
)
from copilot_runtime.errors import CopilotKitError
from copilot_runtime.events import Event, RunError, RunFinished
from copilot_runtime.events.request import TurnRequest, message_for_hooks
from copilot_runtime.guardrails.errors import interrupted_message_reason, is_denial
from copilot_runtime.guardrails.gate import ServerActionCheck, run_guarded
from copilot_runtime.runs.claim import FoldedClaim, claim_run
from copilot_runtime.runs.flusher import Flusher
from copilot_runtime.runs.recorder import CANCELLED_REASON, STREAM_ERROR_REASON, RunRecorder
from copilot_runtime.runs.relay import announce_batch
from copilot_runtime.runs.watchdog import (
    OverLimit,
    Watchdog,
    cancelling_this_task,
    stop_if_unstored,
    watch_if_claimed,
)
from copilot_runtime.tracing.tracer import RunTracer

logger = logging.getLogger(__name__)

UNEXPECTED_ERROR_MESSAGE = "An unexpected error occurred. Please check the server logs."
RUN_TIME_LIMIT_CODE = "RUN_TIME_LIMIT_EXCEEDED"


class Claim(enum.Enum):
    """How the process executing a run takes it from pending to running."""

    # Marked running, then the model is asked (a redelivered task learns first whether its run
    # started already).
    BEFORE_ASKING = "before-asking"
    # Stored running already: an inline run, which ``turn_start`` marked with its request.
    HELD = "held"
    # Marked running while the model is already asked: a round trip off a relayed run's first
    # token. For a task's first delivery only: a duplicate then asks the model too, though it
    # stores and tells nothing.
    WHILE_ASKING = "while-asking"
    # The same, claimed in Redis where the channel layer is, its start recorded with the run's
    # first write (runs/claim_redis.py).
    WHILE_ASKING_IN_REDIS = "while-asking-in-redis"

    @property
    def while_asking(self) -> bool:
        return self in (Claim.WHILE_ASKING, Claim.WHILE_ASKING_IN_REDIS)

    @classmethod
    def for_delivery(cls, *, first_delivery: bool, in_redis: bool) -> Claim:
        """A Celery task's claim: while asking on its first delivery, before on a redelivery."""
        if not first_delivery:
            return cls.BEFORE_ASKING
        return cls.WHILE_ASKING_IN_REDIS if in_redis else cls.WHILE_ASKING


async def run_execute(
    *,
    run_id: str,
    thread_id: str,
    request: TurnRequest,
    publish: Callable[[Event], None] | None = None,
    prepared: PreparedTurn | None = None,
    claim: Claim = Claim.BEFORE_ASKING,
    later_fields: bool = True,
) -> str:
    """Run the turn of a prepared run to its end; returns the final status ("" when the run
    was not pending, e.g. a redelivered task whose run already started). ``claim``: how this
    process takes the run from pending to running (``Claim``). ``later_fields``: whether the
    run's events may carry the fields a web process of the first release cannot read
    (``events.LATER_FIELDS``)."""
    adapter = adapter_from_settings(request.agent_name)
    model = request.forwarded.model or adapter.default_model
    recorder = RunRecorder(
        run_id=run_id,
        thread_id=thread_id,
        agent_name=request.agent_name,
        later_fields=later_fields,
    )
    # Best effort: the tracer never raises, and writes its spans after the run's end.
    tracer = RunTracer.for_run(
        run_id=run_id, thread_id=thread_id, request=request, model=model, provider=adapter.name
    )
    # Executed where it is streamed (inline), the log is read only by clients that re-attach:
    # written less often, the first token on the grid like the rest. Relayed from a worker,
    # the log's batches are the stream's pace, and the first token is announced at once (with
    # whatever the run emitted before it), then written with the next batch.
    flush_ms = runtime_setting("INLINE_EVENT_FLUSH_MS" if publish else "EVENT_FLUSH_MS")
    claimed: asyncio.Future[None] | None = None
    folded: FoldedClaim | None = None
    started = claim is Claim.HELD
    if claim.while_asking and prepared is not None and prepared.stored is None:
        # The run is claimed (pending -> running) while the model is already asked, and
        # counts as a turn whose write is in flight: nothing of it is written, announced or
        # acted on before the claim commits, and nothing at all if the run was not pending.
        if claim is Claim.WHILE_ASKING_IN_REDIS:
            # The flusher is made below, before the claim can be taken.
            folded = FoldedClaim(
                run_id=run_id, model=model, record_start=lambda start: flusher.record_start(start)
            )
            claimed = folded.stored
        else:
            claimed = asyncio.ensure_future(claim_run(run_id=run_id, model=model))
        prepared = dataclasses.replace(prepared, stored=claimed)
        started = True
    flusher = Flusher(
        recorder,
        float(flush_ms) / 1000,
        prepared,
        first_token_at_once=publish is None,
        claim=folded,
    )

    def emit(event: Event) -> None:
        recorder.observe(event)
        tracer.observe(event)
        if publish is not None:
            publish(event)
        flusher.poke()

    async def finish(outcome: RunOutcome) -> None:
        """Log ``run_finished`` with the run's end, and only then tell watchers: a client
        whose stream has ended may send its follow-up at once, and must not find the thread
        still busy."""
        finished = RunFinished(status=str(outcome.status))
        tracer.observe(finished)
        # Pricing the spans may wait (it reads the price table now and then): before the
        # recorder sees the run's end, and with nothing awaited between that and close(), so
        # no flush falling due meanwhile logs and announces the end ahead of the run's status.
        trace = await tracer.close()
        recorder.observe(finished)
        try:
            await flusher.close(outcome, trace)
        except Exception:
            # Every run ends: its end is recorded even when what it produced cannot be.
            logger.exception("storing the end of run %s failed; ending it as failed", run_id)
            error, finished = await _record_bare_end(recorder, prepared)
            if publish is not None:
                publish(error)
        if flusher.unstored:
            return  # the run's turn was never stored: nothing of it is told or exported
        if publish is not None:
            publish(finished)
        tracer.export()

    try:
        # A run stored already running (inline) records its model with its end.
        started = started or await turn_store().mark_running(run_id=run_id, model=model)
    except asyncio.CancelledError:
        started = None  # stopped before it began: recorded as cancelled below
    if started is False:
        logger.info("run %s is not pending any more; not starting it twice", run_id)
        return ""
    if started is None:
        await finish(
            RunOutcome(
                status=RunStatus.CANCELLED,
                usage=recorder.usage,
                error_code="CANCELLED",
                model=model,
            )
        )
        return str(RunStatus.CANCELLED)

    turn_task = asyncio.create_task(
        run_guarded(
            request=request,
            run_id=run_id,
            adapter=adapter,
            emit=emit,
            stored=prepared.stored if prepared is not None else None,
            turn=lambda before_server_action: _turn(
                emit=emit,
                request=request,
                adapter=adapter,
                recorder_first_token_pending=lambda: recorder.first_token_pending,
                before_server_action=before_server_action,
            ),
        )
    )
    stored = prepared.stored if prepared is not None else None
    if stored is not None:
        # Started while its turn's write was in flight: a write that failed (a request that
        # raced this one onto the thread) stops the run, which then stores nothing.
        stored.add_done_callback(lambda done: stop_if_unstored(done, turn_task))
    watchdog = Watchdog(run_id, turn_task, in_process=publish is not None)
    if claimed is None:
        watchdog.start()
    else:
        # Watched once it is this run's: a duplicate must not take over (or end) the heartbeat
        # of the delivery that executes the run.
        claimed.add_done_callback(lambda done: watch_if_claimed(done, watchdog))
    status = RunStatus.SUCCEEDED
    limit = float(runtime_setting("RUN_TIME_LIMIT_SECONDS"))
    # The run's own time limit stops the turn, and the run's end is recorded like any other.
    # A timer cancelling the turn, where a timeout around a shield of it cost a timer, a
    # future and their callbacks more per run.
    over_limit = OverLimit(turn_task)
    timer = asyncio.get_running_loop().call_later(limit, over_limit)
    try:
        try:
            await turn_task
        except asyncio.CancelledError:
            if not over_limit.hit or cancelling_this_task():
                raise  # stopped: handled below
        except Exception:
            if not over_limit.hit:
                raise
            # What the turn raised while it was being stopped for its time: the limit's error
            # is the run's.
        finally:
            timer.cancel()
        if over_limit.hit:
            emit(
                RunError(
                    message=f"The run exceeded its time limit of {limit:g} seconds.",
                    code=RUN_TIME_LIMIT_CODE,
                    details={"limitSeconds": limit},
                )
            )
        if recorder.error is not None:
            status = RunStatus.FAILED
        elif recorder.interrupted:
            status = RunStatus.INTERRUPTED
    except asyncio.CancelledError:
        # Stopped (client gone, stop requested, admin): what was produced so far is kept.
        turn_task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await turn_task  # the upstream request is closed before the run is recorded
        status = RunStatus.CANCELLED
    except CopilotKitError as exc:
        status = RunStatus.FAILED
        emit(RunError(message=exc.message, code=exc.code.value))
    except Exception:
        logger.exception("run %s failed unexpectedly", run_id)
        status = RunStatus.FAILED
        emit(RunError(message=UNEXPECTED_ERROR_MESSAGE, code="UNKNOWN"))
    finally:
        await watchdog.stop()

    reason = CANCELLED_REASON if status == RunStatus.CANCELLED else STREAM_ERROR_REASON
    if recorder.error is not None and is_denial(recorder.error):
        reason = interrupted_message_reason(recorder.error)
    recorder.close_open_messages(reason=reason)
    error = recorder.error
    await finish(
        RunOutcome(
            status=status,
            usage=recorder.usage,
            error_code=(
                error.code if error else ("CANCELLED" if status == RunStatus.CANCELLED else "")
            ),
            error_details=({"message": error.message, **error.details} if error else None),
            limit_trips=recorder.limit_trips,
            model=model,
        )
    )
    if flusher.unstored:
        return ""
    if not after_request_configured():
        return str(status)
    await call_after_request(
        RequestHookContext(
            thread_id=thread_id,
            run_id=run_id,
            input_messages=[message_for_hooks(m) for m in request.messages],
            properties=request.properties,
            url=request.frontend_url,
            output_messages=[dataclasses.asdict(m) for m in recorder.output],
        )
    )
    return str(status)


STORAGE_ERROR = "STORAGE_ERROR"


async def _record_bare_end(
    recorder: RunRecorder, prepared: PreparedTurn | None
) -> tuple[RunError, RunFinished]:
    """The run's end alone (failed, ``STORAGE_ERROR``), with an error and ``run_finished`` in its
    log after everything numbered so far, when its last batch could not be stored."""
    error = RunError(
        message="The runtime could not store this run's output; the run was ended.",
        code=STORAGE_ERROR,
    )
    finished = RunFinished(status=str(RunStatus.FAILED))
    seq = recorder.next_seq
    events = [
        LoggedEvent(seq=seq, type=error.type, payload=error.to_payload()),
        LoggedEvent(seq=seq + 1, type=finished.type, payload=finished.to_payload()),
    ]
    progress = Progress(
        events=events,
        messages=[],
        agent_states=[],
        outcome=RunOutcome(
            status=RunStatus.FAILED,
            usage=recorder.usage,
            error_code=STORAGE_ERROR,
            error_details={"message": error.message},
        ),
    )
    try:
        await turn_store().record(
            run_id=recorder.run_id,
            thread_pk=prepared.thread_pk if prepared is not None else None,
            progress=progress,
        )
        await announce_batch(recorder.run_id, events)
    except Exception:
        # Nothing more can be done here; the reaper ends the run once its heartbeat is stale.
        logger.exception("recording the end of run %s failed", recorder.run_id)
    return error, finished


async def _turn(
    *,
    emit: Callable[[Event], None],
    request: TurnRequest,
    adapter: Any,
    recorder_first_token_pending: Callable[[], bool],
    before_server_action: ServerActionCheck | None = None,
) -> None:
    # An agent other than the chat engine (python, llm, remote, agui) streams its runner's
    # events (agents/runners); the chat engine also offers the remote endpoints' actions.
    # An agent a remote endpoint announced may be unknown to this process yet (a worker).
    host = agent_host()
    await host.resolve(request.agent_name)
    events = host.turn_events(
        request=request, adapter=adapter, before_server_action=before_server_action
    )
    if events is None:
        turn = configured_chat_turn(
            request=request,
            adapter=adapter,
            server_actions=await host.server_actions(request),
            before_server_action=before_server_action,
        )
        events = chat_turn_events(turn)
    first_token_pending = False
    async for event in events:
        emit(event)
        if not first_token_pending and recorder_first_token_pending():
            first_token_pending = True
            # Let the flusher start writing the first token now: a fast model could otherwise
            # stream the whole reply before the loop lets it run.
            await asyncio.sleep(0)
