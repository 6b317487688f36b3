"""A worker's claim on the run its task delivers: in the database, or in Redis with the run's
first announcement.

A delivery that executes a run must be its only one, and nothing of it may be written,
announced or acted on before its claim. Where the claim is taken (engine/claims.py):

- in the database (pending -> running): a delivery made again, an old task, a process whose
  channel layer is not Redis's pub/sub layer, or a Redis error;
- in Redis, for a fresh first delivery: with the announcement of the run's first token when
  the model answers within ``CLAIM_FOLD_SECONDS`` (one script sets the claim and publishes
  only if it was set, so the claim costs no round trip of its own), else on its own. The
  run's start is then recorded with its first write (``RunStart``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from django.utils import timezone

from conversations.services.runs import LoggedEvent
from conversations.store import turn_store
from conversations.store.types import RunStart, turn_committed
from copilot_runtime.runs.claim_redis import claim_in_layer
from copilot_runtime.runs.relay import announce_claiming

logger = logging.getLogger(__name__)

# How long a fresh first delivery keeps its claim for the announcement of the run's first
# token before taking it on its own (a model that answers at once answers well within it).
CLAIM_FOLD_SECONDS = 0.1


class RunNotPending(Exception):
    """The run was claimed already (a duplicate delivery) or stopped before it started."""


async def claim_run(
    *,
    run_id: str,
    model: str,
    taking: Awaitable[bool | None] | None = None,
    record_start: Callable[[RunStart], None] | None = None,
) -> None:
    """Claim the run for this delivery: through ``taking`` (a claim in Redis: True taken,
    False refused, None not taken there), else by marking it running in the database. A run
    taken in Redis hands its start to ``record_start``. Raises ``RunNotPending`` when refused."""
    try:
        taken = None if taking is None else await taking
        if taken is not None:
            if taken and record_start is not None:
                record_start(RunStart(started_at=timezone.now(), model=model))
            claimed = taken
        else:
            claimed = await turn_store().mark_running(run_id=run_id, model=model)
    except Exception:
        # Told here: the run only learns that its claim failed, and stops storing nothing.
        logger.exception("claiming run %s failed; this delivery stores nothing", run_id)
        raise
    if not claimed:
        logger.info("run %s is not pending any more; this delivery stores nothing", run_id)
        raise RunNotPending(run_id)


async def _in_redis(taking: Awaitable[bool | None], run_id: str) -> bool | None:
    try:
        return await taking
    except Exception:
        # Whether the key was set or not, the database's claim decides: a delivery that took
        # the key refuses any other, and the database refuses a run that is not pending.
        logger.warning("claiming run %s in Redis failed; claiming it in the database", run_id)
        return None


class FoldedClaim:
    """A fresh first delivery's claim, taken in Redis with the run's first announcement when
    that comes within ``CLAIM_FOLD_SECONDS``, else on its own (``take``). ``stored`` settles
    as the claim does: what waits on it (the run's writes, its guardrails decision, its
    watchdog) waits as on a claim in the database."""

    def __init__(self, *, run_id: str, model: str, record_start: Callable[[RunStart], None]):
        loop = asyncio.get_running_loop()
        self._run_id = run_id
        self._model = model
        self._record_start = record_start
        self.stored: asyncio.Future[None] = loop.create_future()
        # Whether the first announcement went out with the claim (a script that could not
        # carry it sends nothing: the caller announces once the claim is taken).
        self.announced = False
        self._begun = False
        self._timer = loop.call_later(CLAIM_FOLD_SECONDS, self.take)

    @property
    def open(self) -> bool:
        """Still to be taken: the run's first announcement may carry it."""
        return not self._begun

    def take(self) -> None:
        """Take the claim now, on its own (no-op once begun)."""
        self._begin(claim_in_layer(self._run_id))

    async def announcing(self, events: list[LoggedEvent]) -> bool:
        """Take the claim with the announcement of ``events`` (or, begun already, wait for
        it); whether it was taken. ``announced`` says whether the events went out with it.

        Taken in the caller's task (the run's flusher, which is never cancelled), where
        ``take`` starts a task of its own: that task would first run after the run's turn,
        which a model answering at once lets parse its whole reply first, and the script
        goes out at once (copilot_runtime/fastlane/redis.py)."""
        if not self._begun:
            self._begun = True
            self._timer.cancel()
            try:
                await self._claiming(self._announcing(events))
            except asyncio.CancelledError:
                self.stored.cancel()
                raise
            except Exception as error:
                self._settle(error)
            else:
                self._settle(None)
        return await turn_committed(self.stored)

    async def _announcing(self, events: list[LoggedEvent]) -> bool | None:
        taken = await announce_claiming(self._run_id, events)
        self.announced = bool(taken)
        return taken

    def _begin(self, taking: Coroutine[Any, Any, bool | None]) -> None:
        if self._begun:
            taking.close()
            return
        self._begun = True
        self._timer.cancel()
        claiming = asyncio.ensure_future(self._claiming(taking))
        claiming.add_done_callback(self._settle_from)

    def _claiming(self, taking: Coroutine[Any, Any, bool | None]) -> Coroutine[Any, Any, None]:
        return claim_run(
            run_id=self._run_id,
            model=self._model,
            taking=_in_redis(taking, self._run_id),
            record_start=self._record_start,
        )

    def _settle_from(self, claiming: asyncio.Future[None]) -> None:
        if claiming.cancelled():
            self.stored.cancel()
        else:
            self._settle(claiming.exception())

    def _settle(self, error: BaseException | None) -> None:
        if self.stored.done():
            return
        if error is not None:
            self.stored.set_exception(error)
        else:
            self.stored.set_result(None)
