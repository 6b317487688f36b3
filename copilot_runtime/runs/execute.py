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
import logging
from collections.abc import Callable
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer

from conversations.models import RunStatus
from conversations.services.runs import LoggedEvent, RunOutcome
from conversations.store import turn_store
from conversations.store.types import (
    PreparedTurn,
    Progress,
    RunStart,
    SpanWrite,
    turn_committed,
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
from copilot_runtime.runs.heartbeats import heartbeat_for_loop
from copilot_runtime.runs.log_writer import log_writer_for_loop, next_flush_at
from copilot_runtime.runs.recorder import CANCELLED_REASON, STREAM_ERROR_REASON, RunRecorder
from copilot_runtime.runs.relay import announce_batch
from copilot_runtime.runs.stops import stops_for_loop
from copilot_runtime.tracing.tracer import RunTracer

logger = logging.getLogger(__name__)

UNEXPECTED_ERROR_MESSAGE = "An unexpected error occurred. Please check the server logs."
RUN_TIME_LIMIT_CODE = "RUN_TIME_LIMIT_EXCEEDED"


class _Flusher:
    """Writes the recorder's batches one at a time, off the streaming path.

    A write in progress is never cancelled: a batch taken from the recorder must reach the
    database, or the log would have a hole.
    """

    def __init__(
        self,
        recorder: RunRecorder,
        interval: float,
        prepared: PreparedTurn | None,
        *,
        first_token_at_once: bool = True,
        claim: FoldedClaim | None = None,
    ) -> None:
        self._recorder = recorder
        # Taken with the run's first announcement (its first token), or before its first write.
        self._claim = claim
        self._first_token_at_once = first_token_at_once
        self._thread_pk = prepared.thread_pk if prepared is not None else None
        self._next_position = prepared.next_position if prepared is not None else None
        # A run started while its turn's write was in flight writes nothing before that
        # write commits (its rows refer to the run's), and nothing at all if it failed.
        self._stored = prepared.stored if prepared is not None else None
        self.unstored = False
        self._store = turn_store()
        self._interval = interval
        self._outcome: RunOutcome | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # The writing task starts at the first point of the grid after the run's first event
        # (or at once for a relayed first token). A run that ends before it never needs one:
        # close() writes everything (most runs against a fast model).
        self._start_timer: asyncio.TimerHandle | None = None
        self._closing = False
        self._unwritten: list[Progress] = []
        # A relayed run's first batch with a token: announced at once, written with the
        # run's next write (see _write).
        self._told: Progress | None = None
        # A run claimed outside the database (engine/claims.py): its start, recorded with its
        # first write.
        self._run_start: RunStart | None = None
        # Cuts a wait for the grid short: the run's end, or (relayed) its first token.
        self._hurry = asyncio.Event()
        # The first batch waits for the next point of the grid too (at most an interval). On
        # the event loop's clock, the flush timers' clock.
        self._last_flush = asyncio.get_running_loop().time()

    def record_start(self, start: RunStart) -> None:
        """Record the run's start (pending -> running) with its first write."""
        self._run_start = start

    def poke(self) -> None:
        first_token = self._first_token_at_once and self._recorder.first_token_pending
        if self._task is None:
            if first_token:
                self._start()
            elif self._start_timer is None:
                loop = asyncio.get_running_loop()
                due = next_flush_at(last_flush=self._last_flush, interval=self._interval)
                self._start_timer = loop.call_at(due, self._start)
        self._wake.set()
        if first_token:
            self._hurry.set()

    def _start(self) -> None:
        if self._start_timer is not None:
            self._start_timer.cancel()
            self._start_timer = None
        if self._task is None and not self._closing:
            self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            first_token = self._first_token_at_once and self._recorder.first_token_pending
            if not (self._closing or first_token):
                # Coalesce: at most one write per interval, except for the first token, on the
                # grid all the loop's runs share: their timers are due at the very same loop
                # time, so they wake in one turn of the loop and their batches go out as one
                # statement. The run's end cuts the wait short: close() writes what is left.
                # Relayed, so does the first token: what the run emitted before the model
                # answered goes out with it, in one write and one announcement, instead of a
                # write the first token would then queue behind.
                due = next_flush_at(last_flush=self._last_flush, interval=self._interval)
                if due > asyncio.get_running_loop().time():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout_at(due):
                            await self._hurry.wait()
            if self._closing:
                return
            self._hurry.clear()
            try:
                await self._write()
            except Exception:
                # Kept, and retried with the next batch (a database that hiccuped); the run
                # goes on streaming meanwhile.
                logger.warning(
                    "writing a batch of run %s failed; retrying with the next one",
                    self._recorder.run_id,
                    exc_info=True,
                )

    async def _write(
        self, outcome: RunOutcome | None = None, trace: SpanWrite | None = None
    ) -> None:
        if not self._recorder.has_pending and outcome is None and self._told is None:
            return
        if (
            self._stored is not None
            and not self._claims_announcing(outcome)
            and not await self._claimed()
        ):
            return
        if outcome is None and self._closing:
            # The run ended while this write waited for its turn's write: close() takes
            # everything, the run's end events with its status.
            return
        batch = self._recorder.take_batch()
        first_position = self._next_position
        if first_position is not None:
            self._next_position = first_position + len(batch.messages)
        self._last_flush = asyncio.get_running_loop().time()
        progress = Progress(
            events=batch.events,
            messages=batch.messages,
            agent_states=batch.agent_states,
            first_token_at=batch.first_token_at,
            outcome=outcome,
            interrupted=self._recorder.interrupted,
            first_position=first_position,
            trace=trace,
            start=self._run_start,
        )
        self._run_start = None  # this write records it now (or, failing, the one retrying it)
        told = 0
        if self._told is not None:
            told = len(self._told.events)
            progress = _joined(self._told, progress)
            self._told = None
        # Earlier batches whose write failed go first, so the log stays in order; this one
        # waits behind them if they fail again (taken from the recorder, it is only here).
        try:
            while self._unwritten:
                await self._store.record(
                    run_id=self._recorder.run_id,
                    thread_pk=self._thread_pk,
                    progress=self._unwritten[0],
                )
                await announce_batch(self._recorder.run_id, self._unwritten.pop(0).events)
        except Exception:
            if outcome is None:
                self._unwritten.append(progress)
            raise
        # Relayed, the first token is announced at once, on its own: queued behind the loop's
        # write in flight, it would reach the followers that much later. Everything else
        # (inline, the first token's time too) is written, then announced, with what the
        # loop's other runs hand over meanwhile.
        alone = self._first_token_at_once and batch.first_token_at is not None
        if (
            self._stored is not None
            and not (alone and outcome is None)
            and not await self._claimed()
        ):
            return  # nothing of the run is stored: the batch goes with it
        try:
            if alone and outcome is None and self._stored is not None and self._claim is not None:
                # The claim rides on the first token's announcement (run_claim.py).
                if not await self._claim.announcing(progress.events):
                    self.unstored = True
                    return
                self._stored = None
                if not self._claim.announced:
                    await announce_batch(self._recorder.run_id, progress.events)
                self._told = progress
                self._wake.set()
                return
            if alone and outcome is None:
                # ... and written with the run's next write (its end, or the next point of the
                # grid: the loop comes round again), one statement a run where it was two. A
                # follower that misses the announcement finds the batch in the log, as every
                # later announcement follows that write's commit. Never the run's end: a
                # client told of it may send its next turn at once.
                await announce_batch(self._recorder.run_id, progress.events)
                self._told = progress
                self._wake.set()
                return
            if alone:
                await self._store.record(
                    run_id=self._recorder.run_id, thread_pk=self._thread_pk, progress=progress
                )
            else:
                await log_writer_for_loop().write(
                    run_id=self._recorder.run_id,
                    thread_pk=self._thread_pk,
                    progress=progress,
                    told=told,
                )
                return  # written and announced (but for what was told already)
        except Exception:
            if trace is None:
                if outcome is None:
                    self._unwritten.append(progress)
                raise
            # Tracing is best effort: the run's end is stored without its spans rather than
            # not at all.
            logger.warning(
                "storing the spans of run %s failed; its end is stored without them",
                self._recorder.run_id,
                exc_info=True,
            )
            progress.trace = None
            await self._store.record(
                run_id=self._recorder.run_id, thread_pk=self._thread_pk, progress=progress
            )
        # Logged (and committed) first, announced second: a follower can always catch up.
        await announce_batch(self._recorder.run_id, progress.events[told:])

    def _claims_announcing(self, outcome: RunOutcome | None) -> bool:
        """Whether this write's claim may ride on the first token's announcement."""
        return (
            self._claim is not None
            and self._claim.open
            and outcome is None
            and self._first_token_at_once
            and self._recorder.first_token_pending
        )

    async def _claimed(self) -> bool:
        """Wait for the run's claim (taking it now if it waited for an announcement)."""
        if self._claim is not None:
            self._claim.take()
        assert self._stored is not None
        if not await turn_committed(self._stored):
            self.unstored = True
            return False
        self._stored = None
        return True

    async def close(self, outcome: RunOutcome, trace: SpanWrite | None = None) -> None:
        """Write everything still pending, and the run's end (with its spans), after any
        write in progress."""
        self._closing = True
        if self._start_timer is not None:
            self._start_timer.cancel()
            self._start_timer = None
        self._hurry.set()
        self._wake.set()
        if self._task is not None:
            await self._task
        await self._write(outcome, trace)


def _joined(told: Progress, later: Progress) -> Progress:
    """One write of a batch announced already and the run's next one: the same rows, in order."""
    return Progress(
        events=told.events + later.events,
        messages=told.messages + later.messages,
        agent_states=told.agent_states + later.agent_states,
        first_token_at=told.first_token_at or later.first_token_at,
        outcome=later.outcome,
        interrupted=later.interrupted,
        first_position=told.first_position,
        trace=later.trace,
        start=told.start or later.start,
    )


class _OverLimit:
    """Called when a run's time is up: stops its turn, and remembers it did."""

    def __init__(self, turn_task: asyncio.Task[Any]) -> None:
        self._turn_task = turn_task
        self.hit = False

    def __call__(self) -> None:
        if not self._turn_task.done():
            self.hit = True
            self._turn_task.cancel()


def _cancelling_this_task() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


class _Watchdog:
    """While a run executes: renew its heartbeat, and stop it when a stop is requested
    (told at once on the layer, and checked in the database with each heartbeat)."""

    def __init__(self, run_id: str, target: asyncio.Task[Any], *, in_process: bool) -> None:
        self._run_id = run_id
        self._target = target
        self._in_process = in_process
        self._listening = False
        self._started = False
        self._stopped = False

    def start(self) -> None:
        if self._started or self._stopped:
            return  # a claim that committed after the run had ended: nothing left to watch
        self._started = True
        # The heartbeat is renewed with every other run of this loop's (one statement).
        heartbeat_for_loop().register(self._run_id, self._stop_target)
        # A run executing where it is streamed (inline) is stopped through this process's live
        # registry; an in-memory layer reaches no other process, so listening on it would only
        # cost a task.
        self._listening = not (
            self._in_process and isinstance(get_channel_layer(), InMemoryChannelLayer)
        )
        if self._listening:
            stops_for_loop().register(self._run_id, self._stop_target)

    def _stop_target(self) -> None:
        if not self._target.done():
            self._target.cancel()

    async def stop(self) -> None:
        """Stop watching."""
        self._stopped = True
        if not self._started:
            return
        heartbeat_for_loop().unregister(self._run_id)
        if self._listening:
            stops_for_loop().unregister(self._run_id)


def _watch_if_claimed(claim: asyncio.Future[None], watchdog: _Watchdog) -> None:
    if not claim.cancelled() and claim.exception() is None:
        watchdog.start()


def _stop_if_unstored(stored: asyncio.Future[None], turn_task: asyncio.Task[Any]) -> None:
    if stored.cancelled() or stored.exception() is not None:
        turn_task.cancel()


async def run_execute(
    *,
    run_id: str,
    thread_id: str,
    request: TurnRequest,
    publish: Callable[[Event], None] | None = None,
    prepared: PreparedTurn | None = None,
    started: bool = False,
    claim_while_streaming: bool = False,
    claim_in_redis: bool = False,
) -> str:
    """Run the turn of a prepared run to its end; returns the final status ("" when the run
    was not pending, e.g. a redelivered task whose run already started).

    ``claim_while_streaming``: mark the run running at the same time as the model is asked,
    rather than before (a round trip off a relayed run's first token). For a task's first
    delivery only: a duplicate then asks the model too, though it stores and tells nothing.
    ``claim_in_redis`` (with it, for a fresh first delivery): claim the run in Redis where
    the channel layer is there, and record its start with its first write (engine/claims.py)."""
    adapter = adapter_from_settings(request.agent_name)
    model = request.forwarded.model or adapter.default_model
    recorder = RunRecorder(run_id=run_id, thread_id=thread_id, agent_name=request.agent_name)
    # Best effort: the tracer never raises, and writes its spans after the run's end.
    tracer = RunTracer.for_run(
        run_id=run_id, thread_id=thread_id, request=request, model=model, provider=adapter.name
    )
    # Executed where it is streamed (inline), the log is read only by clients that re-attach:
    # written less often, the first token on the grid like the rest. Relayed from a worker,
    # the log's batches are the stream's pace, and the first token is announced at once (with
    # whatever the run emitted before it), then written with the next batch.
    flush_ms = runtime_setting("INLINE_EVENT_FLUSH_MS" if publish else "EVENT_FLUSH_MS")
    claim: asyncio.Future[None] | None = None
    folded: FoldedClaim | None = None
    if claim_while_streaming and not started and prepared is not None and prepared.stored is None:
        # The run is claimed (pending -> running) while the model is already asked, and
        # counts as a turn whose write is in flight: nothing of it is written, announced or
        # acted on before the claim commits, and nothing at all if the run was not pending.
        if claim_in_redis:
            # The flusher is made below, before the claim can be taken.
            folded = FoldedClaim(
                run_id=run_id, model=model, record_start=lambda start: flusher.record_start(start)
            )
            claim = folded.stored
        else:
            claim = asyncio.ensure_future(claim_run(run_id=run_id, model=model))
        prepared = dataclasses.replace(prepared, stored=claim)
        started = True
    flusher = _Flusher(
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
        stored.add_done_callback(lambda done: _stop_if_unstored(done, turn_task))
    watchdog = _Watchdog(run_id, turn_task, in_process=publish is not None)
    if claim is None:
        watchdog.start()
    else:
        # Watched once it is this run's: a duplicate must not take over (or end) the heartbeat
        # of the delivery that executes the run.
        claim.add_done_callback(lambda done: _watch_if_claimed(done, watchdog))
    status = RunStatus.SUCCEEDED
    limit = float(runtime_setting("RUN_TIME_LIMIT_SECONDS"))
    # The run's own time limit stops the turn, and the run's end is recorded like any other.
    # A timer cancelling the turn, where a timeout around a shield of it cost a timer, a
    # future and their callbacks more per run.
    over_limit = _OverLimit(turn_task)
    timer = asyncio.get_running_loop().call_later(limit, over_limit)
    try:
        try:
            await turn_task
        except asyncio.CancelledError:
            if not over_limit.hit or _cancelling_this_task():
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
