"""A stop's answer goes out before the stopped run's stream ends.

The v2 client sends its stop request and does not wait for it: when the run's stream ends
first, a client that goes away with its run (a page that navigates, a script that exits) never
sees the answer. The TypeScript runtime answers the stop first, every time (it answers as soon
as it has aborted the agent; the run's end follows through the agent's stream). Here a stop
cancels an inline run's task at once, so the run's last events could be written before the stop
handler's response is: the stream of a run whose stop is being answered in this process holds
its next bytes until that answer has been sent, for ``ANSWER_WAIT_SECONDS`` at most.

"Sent" is when Django closes the stop's response, which it does once the response's bytes were
handed to the server. A response Django never closes (the caller went away first) counts as
sent when it is garbage-collected, so nothing is held or kept past it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import weakref
from typing import Any

import orjson
from django.http import HttpResponse

# Far longer than a JSON answer takes to go out on a live connection; only a stop whose answer
# is lost (never closed, not yet collected) makes a stream wait this long.
ANSWER_WAIT_SECONDS = 2.0

# run id -> the answers of the stops of it not yet sent. The stop's response is closed on a
# thread of Django's (``sync_to_async``), the stream waits on the event loop: hence a lock and
# thread-safe futures.
_pending: dict[str, list[concurrent.futures.Future[None]]] = {}
_lock = threading.Lock()


def _begin(run_ids: tuple[str, ...]) -> concurrent.futures.Future[None]:
    answer: concurrent.futures.Future[None] = concurrent.futures.Future()
    with _lock:
        for run_id in run_ids:
            _pending.setdefault(run_id, []).append(answer)
    return answer


def _sent(run_ids: tuple[str, ...], answer: concurrent.futures.Future[None]) -> None:
    with _lock:
        for run_id in run_ids:
            waiting = _pending.get(run_id)
            if waiting is None:
                continue
            if answer in waiting:
                waiting.remove(answer)
            if not waiting:
                del _pending[run_id]
    # A stream that gave up waiting cancelled it.
    with contextlib.suppress(concurrent.futures.InvalidStateError):
        answer.set_result(None)


class StopAnswer:
    """The answer being prepared to a stop of ``run_ids``: streams of those runs hold their
    bytes from now until the response made by ``response`` has been sent, or ``drop``."""

    def __init__(self, run_ids: tuple[str, ...]) -> None:
        self._run_ids = run_ids
        self._answer = _begin(run_ids)

    def response(self, payload: Any) -> HttpResponse:
        return _AnsweringResponse(orjson.dumps(payload), self._run_ids, self._answer)

    def drop(self) -> None:
        """No answer will be made (the stop failed before it): release the streams."""
        _sent(self._run_ids, self._answer)


class _AnsweringResponse(HttpResponse):
    """A JSON answer that tells the streams it was sent when Django closes it."""

    def __init__(
        self,
        content: bytes,
        run_ids: tuple[str, ...],
        answer: concurrent.futures.Future[None],
    ) -> None:
        super().__init__(content, content_type="application/json")
        # Called once, by close() or when the response is collected, whichever comes first.
        self._answered = weakref.finalize(self, _sent, run_ids, answer)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._answered()


def stop_answer_pending(run_id: str) -> bool:
    """Whether a stop of ``run_id`` is being answered in this process (a dict look-up: asked
    for every batch a stream writes)."""
    return run_id in _pending


async def stop_answer_wait(run_id: str) -> None:
    """Until every stop of ``run_id`` being answered in this process has been answered, or
    ``ANSWER_WAIT_SECONDS`` have passed."""
    with _lock:
        answers = list(_pending.get(run_id, ()))
    if not answers:
        return
    waiting = [asyncio.wrap_future(answer) for answer in answers]
    _, late = await asyncio.wait(waiting, timeout=ANSWER_WAIT_SECONDS)
    for future in late:
        future.cancel()  # given up on: the stream goes on
