"""Executing one prepared run: the engine's events persisted, published, and finished.

This is the body every executor runs (an in-process task today; a Celery worker later). The
stream is never held up by the database: events are published at once and written by a
flusher in small batches (the first token at once, then every ``EVENT_FLUSH_MS``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

from asgiref.sync import sync_to_async

from conversations.models import RunStatus
from conversations.services.runs import run_finish, run_mark_running, run_record_progress
from copilot_runtime.adapters import adapter_from_settings
from copilot_runtime.conf import runtime_setting
from copilot_runtime.engine.actions import server_actions_from_settings
from copilot_runtime.engine.chat import ChatTurn, chat_turn_events
from copilot_runtime.engine.hooks import RequestHookContext, call_after_request
from copilot_runtime.engine.recorder import CANCELLED_REASON, STREAM_ERROR_REASON, RunRecorder
from copilot_runtime.engine.request import TurnRequest
from copilot_runtime.errors import CopilotKitError
from copilot_runtime.events import Event, RunError, RunFinished

logger = logging.getLogger(__name__)

UNEXPECTED_ERROR_MESSAGE = "An unexpected error occurred. Please check the server logs."


class _Flusher:
    """Writes the recorder's batches one at a time, off the streaming path.

    A write in progress is never cancelled: a batch taken from the recorder must reach the
    database, or the log would have a hole.
    """

    def __init__(self, recorder: RunRecorder, interval: float) -> None:
        self._recorder = recorder
        self._interval = interval
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._last_flush = 0.0
        self._flushed_first = False

    def poke(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop())
        self._wake.set()

    async def _loop(self) -> None:
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            if self._flushed_first and not self._closing:
                # Coalesce: at most one write per interval after the first one.
                delay = self._interval - (time.monotonic() - self._last_flush)
                if delay > 0:
                    await asyncio.sleep(delay)
            await self._write()

    async def _write(self) -> None:
        if not self._recorder.has_pending:
            return
        batch = self._recorder.take_batch()
        self._flushed_first = True
        self._last_flush = time.monotonic()
        await sync_to_async(run_record_progress)(
            run_id=self._recorder.run_id,
            events=batch.events,
            messages=batch.messages,
            agent_states=batch.agent_states,
            first_token_at=batch.first_token_at,
        )

    async def close(self) -> None:
        """Write everything still pending, after any write in progress."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
        await self._write()


async def run_execute(
    *,
    run_id: str,
    thread_id: str,
    request: TurnRequest,
    publish: Callable[[Event], None],
) -> str:
    """Run the turn of a prepared run to its end; returns the final status."""
    adapter = adapter_from_settings()
    model = request.forwarded.model or adapter.default_model
    recorder = RunRecorder(run_id=run_id, thread_id=thread_id, agent_name=request.agent_name)
    flusher = _Flusher(recorder, interval=float(runtime_setting("EVENT_FLUSH_MS")) / 1000)

    def emit(event: Event) -> None:
        recorder.observe(event)
        publish(event)
        flusher.poke()

    status = RunStatus.SUCCEEDED
    try:
        if not await sync_to_async(run_mark_running)(run_id=run_id, model=model):
            logger.info("run %s is not pending any more; not starting it twice", run_id)
            return ""
        turn = ChatTurn(
            request=request,
            adapter=adapter,
            server_actions=server_actions_from_settings(),
            max_iterations=int(runtime_setting("MAX_ITERATIONS")),
        )
        async for event in chat_turn_events(turn):
            emit(event)
        if recorder.error is not None:
            status = RunStatus.FAILED
    except asyncio.CancelledError:
        # Stopped (client gone, /stop, admin): what was produced so far is kept below.
        status = RunStatus.CANCELLED
    except CopilotKitError as exc:
        status = RunStatus.FAILED
        emit(RunError(message=exc.message, code=exc.code.value))
    except Exception:
        logger.exception("run %s failed unexpectedly", run_id)
        status = RunStatus.FAILED
        emit(RunError(message=UNEXPECTED_ERROR_MESSAGE, code="UNKNOWN"))

    reason = CANCELLED_REASON if status == RunStatus.CANCELLED else STREAM_ERROR_REASON
    recorder.close_open_messages(reason=reason)
    emit(RunFinished(status=str(status)))
    await flusher.close()
    error = recorder.error
    await sync_to_async(run_finish)(
        run_id=run_id,
        status=status,
        usage=recorder.usage,
        error_code=(
            error.code if error else ("CANCELLED" if status == RunStatus.CANCELLED else "")
        ),
        error_details=({"message": error.message, **error.details} if error else None),
    )
    await call_after_request(
        RequestHookContext(
            thread_id=thread_id,
            run_id=run_id,
            input_messages=[dataclasses.asdict(m) for m in request.messages],
            properties=request.properties,
            url=request.frontend_url,
            output_messages=[dataclasses.asdict(m) for m in recorder.output],
        )
    )
    return str(status)
