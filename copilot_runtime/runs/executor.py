"""Where a run executes: in this process (``inline``) or on a Celery worker (``celery``).

The choice is explicit (``COPILOT_RUNTIME["EXECUTOR"]``); a configured Redis alone never makes
runs wait for a worker that does not exist. Either way the same ``run_execute`` runs the turn,
and watchers receive the same events: in-process directly, from a worker through the event log
and the channel layer.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from asgiref.sync import sync_to_async

from conversations.models import Run, RunStatus
from conversations.services.runs import run_request_cancel
from conversations.store.grouped import Grouped, PerLoop
from conversations.store.health import db_sync_to_async
from conversations.store.types import PreparedTurn
from copilot_runtime.conf import runtime_setting
from copilot_runtime.events import (
    READS_LATER_FIELDS,
    Event,
    RunError,
    RunFinished,
    event_from_payload,
)
from copilot_runtime.events.request import (
    TurnRequest,
    turn_request_from_payload,
    turn_request_to_json,
    turn_request_to_payload,
)
from copilot_runtime.runs.claim_redis import claim_in_layer_allowed, queued_now
from copilot_runtime.runs.execute import Claim, run_execute
from copilot_runtime.runs.inbox import Inbox
from copilot_runtime.runs.layer_groups import GroupListener, leave_quietly
from copilot_runtime.runs.live import LiveRun, live_run_forget, live_run_get, live_run_register
from copilot_runtime.runs.relay import follow_run, join_run
from copilot_runtime.runs.replies import (
    ReplySlot,
    replies_for_loop,
    reply_group,
    replying_to,
)
from copilot_runtime.runs.stops import announce_stop
from copilot_runtime.runs.task_history import request_from_text, request_rebuilt

if TYPE_CHECKING:  # Celery is imported on use: only the celery executor needs it
    from celery import Celery

logger = logging.getLogger(__name__)

INLINE = "inline"
CELERY = "celery"


def executor_kind() -> str:
    kind = str(runtime_setting("EXECUTOR")).strip().lower()
    return CELERY if kind == CELERY else INLINE


def placement_of(
    prepared: PreparedTurn, request: TurnRequest, *, carried: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What a worker needs to execute a prepared run without reading it back (JSON);
    ``carried`` is the request's part when it was built already (a Celery turn's: the request
    by reference to the thread's history, engine/task_history.py), else the whole request
    (``request_in_task``).
    ``turn_start`` adds ``reply_to``, the group its follower listens on
    (copilot_runtime/runs/replies.py)."""
    return {
        "thread_id": prepared.thread_id,
        "thread_pk": prepared.thread_pk,
        "next_position": prepared.next_position,
        # How fresh the task is, for its first delivery's claim (engine/claims.py).
        "queued_at": queued_now(),
        # This web process reads the events' later fields (events.LATER_FIELDS).
        READS_LATER_FIELDS: True,
        **(request_in_task(request) if carried is None else carried),
    }


def request_in_task(request: TurnRequest) -> dict[str, Any]:
    """The whole request as a placement's part: its JSON text (``request_json``), or, for a
    request holding a value orjson does not write, its payload (``request``). What earlier
    versions queued; this one's turns refer to the history instead (engine/task_history.py)."""
    try:
        return {"request_json": turn_request_to_json(request)}
    except TypeError:
        return {"request": turn_request_to_payload(request)}


def request_from_task(placement: dict[str, Any]) -> TurnRequest:
    # By the stored thread (its primary key), not the client's thread id: that names a thread
    # only together with its owner, and two owners' threads of one id are two histories.
    thread_pk = placement.get("thread_pk")
    thread_pk = thread_pk if type(thread_pk) is int else None
    text = placement.get("request_json")
    if text is not None:
        return request_from_text(text, thread_pk)
    request = turn_request_from_payload(placement["request"])
    request.thread_pk = thread_pk
    return request


async def request_of_task(*, run_id: str, placement: dict[str, Any]) -> TurnRequest:
    """The request a task's placement carries: by reference to the thread's history (this
    version's tasks, engine/task_history.py), or whole (tasks of earlier versions)."""
    if "history" in placement:
        return await request_rebuilt(run_id=run_id, placement=placement)
    return request_from_task(placement)


EXECUTE_RUN_TASK = "copilot.execute_run"
# Several runs queued together, each as ``execute_run`` would execute it (see ``enqueue_run``).
EXECUTE_RUNS_TASK = "copilot.execute_runs"


def task_time_limit_seconds() -> float:
    # The run ends itself at RUN_TIME_LIMIT_SECONDS (and records its end); Celery's hard limit
    # is only the backstop for a worker that cannot even do that. A task's runs execute at
    # once, so several share the one limit.
    return float(runtime_setting("RUN_TIME_LIMIT_SECONDS")) + 60


def _task_arguments(run_id: str, placement: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "args": [run_id] if placement is None else [run_id, placement],
        # The message's readable form of its arguments (worker logs, monitoring) names the run
        # only: by default Celery builds it with a safe repr of the whole conversation (a good
        # part of send_task's time) and shows it to every log and monitor.
        "argsrepr": repr([run_id]),
        "time_limit": task_time_limit_seconds(),
    }


def _runs_task_arguments(queued: Sequence[_QueuedRun]) -> dict[str, Any]:
    """``EXECUTE_RUNS_TASK``'s arguments: [[run id, placement], ...], shown as the run ids."""
    return {
        "args": [[[one.run_id, one.placement] for one in queued]],
        "argsrepr": repr([[one.run_id for one in queued]]),
        "time_limit": task_time_limit_seconds(),
    }


def enqueue_on_worker(*, run_id: str, placement: dict[str, Any] | None = None) -> None:
    """Hand a committed run to the Celery workers: by the task's name, so the engine does not
    import the tasks module (copilot_runtime/tasks.py), which imports the engine."""
    from celery import current_app  # on use: only the celery executor needs it

    current_app.send_task(EXECUTE_RUN_TASK, **_task_arguments(run_id, placement))


async def enqueue_run(*, run_id: str, placement: dict[str, Any] | None = None) -> None:
    """``enqueue_on_worker`` from the event loop: on a plain Redis broker the message is pushed
    on the loop (copilot_runtime/runs/publish.py), else Celery publishes it from a
    thread. A push that fails is left to Celery's publish, with its retries.

    Runs this loop queues while its previous push is in flight go together, in one message
    of ``EXECUTE_RUNS_TASK``: a worker then pays Celery's and kombu's handling of a message
    (its delivery, acknowledgement, decoding and task tracing: a large part of the worker's
    CPU per run under load) once per group. A loop that queues one run at a time
    pushes each at once, as a message of ``EXECUTE_RUN_TASK``."""
    from celery import current_app
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    from copilot_runtime.runs.publish import fast_publish_possible

    app = current_app._get_current_object()
    if fast_publish_possible(app, name=EXECUTE_RUN_TASK):
        try:
            await _pushes.get().submit(_QueuedRun(app=app, run_id=run_id, placement=placement))
            return
        except (RedisConnectionError, RedisTimeoutError, OSError):
            # Pushed twice at worst (a timeout after the push): the second delivery's claim
            # fails, and it stores and tells nothing (it may have asked the model meanwhile).
            logger.warning("queueing run %s on Redis failed; Celery publishes it", run_id)
    await sync_to_async(enqueue_on_worker)(run_id=run_id, placement=placement)


async def broker_ping() -> None:
    """One round trip to the broker on the connection this process queues runs with (for
    ``/readyz``); raises what the broker's client raised."""
    from celery import current_app

    from copilot_runtime.fastlane.redis import command_at_once
    from copilot_runtime.runs.publish import CLIENTS, fast_publish_possible

    app = current_app._get_current_object()
    if fast_publish_possible(app, name=EXECUTE_RUN_TASK):
        await command_at_once(CLIENTS.get(app), "PING")
        return
    await sync_to_async(_broker_connection_check, thread_sensitive=False)(app)


def _broker_connection_check(app: Celery) -> None:
    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, timeout=2)


@dataclasses.dataclass(frozen=True, slots=True)
class _QueuedRun:
    app: Celery
    run_id: str
    placement: dict[str, Any] | None


async def _push_runs(queued: Sequence[_QueuedRun]) -> None:
    """One message for ``queued``: a run alone keeps the one-run task (every worker version
    reads it); several go as one ``EXECUTE_RUNS_TASK`` where it takes the one-run task's way
    (the same route, pushed on the loop)."""
    from copilot_runtime.runs.publish import publish_task, same_route

    app = queued[0].app
    if len(queued) == 1 or not same_route(app, EXECUTE_RUNS_TASK, EXECUTE_RUN_TASK):
        for one in queued:
            arguments = _task_arguments(one.run_id, one.placement)
            await publish_task(app, name=EXECUTE_RUN_TASK, **arguments)
        return
    await publish_task(app, name=EXECUTE_RUNS_TASK, **_runs_task_arguments(queued))


# One push in flight per loop; what comes meanwhile is the next message.
_pushes: PerLoop[Grouped[_QueuedRun]] = PerLoop(lambda: Grouped(_push_runs, at_once=True))


def start_inline(
    *,
    run_id: str,
    thread_id: str,
    request: TurnRequest,
    prepared: PreparedTurn | None = None,
) -> tuple[LiveRun, Inbox[Event | None]]:
    """Execute the run as a task of this process's event loop; returns its live fan-out and an
    inbox registered before the run starts, so no event is missed."""
    live = live_run_register(run_id)
    events = live.watch()

    async def execute() -> None:
        try:
            await run_execute(
                run_id=run_id,
                thread_id=thread_id,
                request=request,
                publish=live.publish,
                prepared=prepared,
                # Prepared by turn_start, the run was stored already running.
                claim=Claim.HELD if prepared is not None else Claim.BEFORE_ASKING,
            )
        finally:
            live.close()
            live_run_forget(run_id)

    # A fresh context: the run outlives the request, and must not inherit the request's
    # thread-sensitive executor, which Django shuts down when the response ends.
    live.task = asyncio.create_task(execute(), name=f"run:{run_id}", context=contextvars.Context())
    return live, events


class Following(NamedTuple):
    """A run followed from this process: its events (``None`` at the end), the function that
    stops following, and the reply group its task must name (None: its own group)."""

    events: Inbox[Event | None]
    detach: Callable[[], None]
    reply_to: str | None


async def watch_remote(run_id: str, *, joined_before_queued: bool = False) -> Following:
    """Follow a run executing elsewhere.

    ``joined_before_queued``: the caller queues the run only after this returns, naming
    ``reply_to`` in its task. The follower then listens before the run can say anything
    (on the loop's reply group, copilot_runtime/runs/replies.py; on the run's group when that
    cannot be joined), and does not read the log first (``follow_run``'s ``joined``)."""
    events: Inbox[Event | None] = Inbox()
    joined: GroupListener | ReplySlot | None = None
    if joined_before_queued:
        joined = await replies_for_loop().register(run_id) or await join_run(run_id)

    async def pump() -> None:
        try:
            async for logged in follow_run(
                run_id, check_alive=reap_if_stale_check(run_id), joined=joined
            ):
                events.put_nowait(event_from_payload(logged.type, logged.payload))
        except Exception:
            logger.exception("following run %s failed", run_id)
            events.put_nowait(
                RunError(
                    message="The runtime lost track of this run; it may still finish. "
                    "Reload to see its result.",
                    code="RELAY_FAILED",
                )
            )
            events.put_nowait(RunFinished(status="failed"))
        finally:
            events.put_nowait(None)

    # A fresh context, as for inline runs: the follower must not use the request's
    # thread-sensitive executor, which ends with the response.
    task = asyncio.create_task(pump(), name=f"follow:{run_id}", context=contextvars.Context())
    if joined is not None:
        task.add_done_callback(_leave_if_never_followed(joined))
    reply_to = joined.group if isinstance(joined, ReplySlot) else None
    return Following(events, task.cancel, reply_to)


def _leave_if_never_followed(
    joined: GroupListener | ReplySlot,
) -> Callable[[asyncio.Task[None]], None]:
    """The follower leaves the group it was given; one stopped before it started never saw it."""

    def leave(_task: asyncio.Task[None]) -> None:
        if not joined.left:
            leaving = asyncio.ensure_future(leave_quietly(joined))
            _LEAVING.add(leaving)
            leaving.add_done_callback(_LEAVING.discard)

    return leave


# Held until done: the loop keeps only weak references to its tasks.
_LEAVING: set[asyncio.Future[None]] = set()


def reap_if_stale_check(run_id: str) -> Callable[[], Awaitable[None]]:
    """A ``check_alive`` for followers: ends the run if its executor stopped beating."""

    async def check() -> None:
        from copilot_runtime.runs.reaper import runs_reap_stale

        await db_sync_to_async(runs_reap_stale)(run_ids=[run_id])

    return check


async def run_cancel(*, run_id: str) -> bool:
    """Stop a run wherever it executes. False when it had already ended."""
    live = live_run_get(run_id)
    if live is not None and live.cancel():
        return True
    requested = await db_sync_to_async(run_request_cancel)(run_id=run_id)
    if requested:
        await announce_stop(run_id)
    return requested


async def runs_execute_stored(
    *, runs: Sequence[tuple[str, dict[str, Any] | None]], first_delivery: bool = False
) -> list[str]:
    """``run_execute_stored`` for each of ``runs`` (run id, placement), all at once. A run that
    raises does not stop the others; once all have ended, the first such error is raised (the
    task fails, as a one-run task would)."""
    outcomes = await asyncio.gather(
        *(
            run_execute_stored(run_id=run_id, placement=placement, first_delivery=first_delivery)
            for run_id, placement in runs
        ),
        return_exceptions=True,
    )
    results: list[str] = []
    failure: BaseException | None = None
    for (run_id, _), outcome in zip(runs, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            if failure is None:
                failure = outcome
            logger.error("run %s failed on the worker", run_id, exc_info=outcome)
            results.append("")
        else:
            results.append(outcome)
    if failure is not None:
        raise failure
    return results


async def run_execute_stored(
    *, run_id: str, placement: dict[str, Any] | None = None, first_delivery: bool = False
) -> str:
    """Execute a run prepared by another process (the Celery task): from the task's
    ``placement`` (tasks of earlier versions: from what the run stored). ``first_delivery``: the
    broker says the task was not delivered before, so the run is claimed while its model is
    already asked (a redelivered task learns that its run started before asking)."""
    if placement is not None:
        prepared = PreparedTurn(
            run_id=run_id,
            thread_id=placement["thread_id"],
            thread_pk=placement["thread_pk"],
            next_position=placement.get("next_position"),
        )
        with replying_to(run_id, reply_group(placement.get("reply_to"))):
            return await run_execute(
                run_id=run_id,
                thread_id=prepared.thread_id,
                request=await request_of_task(run_id=run_id, placement=placement),
                prepared=prepared,
                claim=Claim.for_delivery(
                    first_delivery=first_delivery,
                    in_redis=first_delivery and claim_in_layer_allowed(placement),
                ),
                later_fields=placement.get(READS_LATER_FIELDS) is True,
            )
    run = await db_sync_to_async(_stored_run)(run_id)
    if run.status != RunStatus.PENDING:
        logger.info("run %s is not pending any more; not starting it twice", run_id)
        return ""
    if "messages" not in (run.request_payload or {}):
        # Only runs queued by earlier versions stored their whole request.
        logger.error("the task of run %s carries no request; cannot execute it", run_id)
        return ""
    request = turn_request_from_payload(run.request_payload)
    request.thread_pk = run.thread_id
    return await run_execute(
        run_id=run_id, thread_id=run.thread.thread_id, request=request, later_fields=False
    )


def _stored_run(run_id: str) -> Run:
    return Run.objects.select_related("thread").get(pk=run_id)
