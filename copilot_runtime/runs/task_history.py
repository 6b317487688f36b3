"""A run's task carries a reference to the thread's history, not the history.

CopilotKit clients re-send the whole conversation with every turn, and a run's task used to
carry all of it (``request_json``): every task message grew with the thread, and the web
process, the broker and the worker each handled its JSON at every turn. Now the task carries
the request without the messages the worker can find itself, and where to put them back.

Where they come from: an earlier request of the same thread, the *base* (in practice the
thread's previous run, queued by this web process). A message of the request whose JSON form
(``message_json``: every field, its type and its keys' order) is byte for byte a message of the
base is taken from there; every other message (a new one, an edited or regenerated one, the
v1 client's instructions, which come under a fresh id with every request, a whole history this
process has not queued a run of) travels in the task, as before.

Why an earlier request and not the thread's stored rows: a stored row cannot be turned back
into the message the client sent.

- Text messages of the system and developer roles are not stored at all.
- A message sent without ``createdAt`` (every AG-UI message) is stored with the time it was
  stored; a v1 client re-sends a reply with the ``createdAt`` the web process gave it while
  relaying the run (copilot_runtime/graphql/types/v1_objects.py), never the row's.
- A message re-sent under a stored id with another body (an edit that keeps the id) is matched
  by its id and left as it was stored.
- PostgreSQL's jsonb sorts a tool call's arguments' keys (and an agent state's) and writes
  numbers anew (``1e22`` comes back an integer): the model would be shown other arguments.

Telling which rows still match would mean reading them back on the web at every turn. An
earlier request's messages are what the client sent: found again by their form, they are the
very values the web parsed. So the request's known history (copilot_runtime/history) keeps the
forms of the last request this process queued on the thread (``QueuedRun``), and the task names
that run as its ``base``.

The worker finds the base in its known history of the thread (per stored thread, the messages
of the last run it executed, usually the base itself) or in the database: every run stores, in its
request payload (``task_history``, written by the statement that inserts the run), what its
task carried of the history: its base, where the base's messages go, and the carried messages'
JSON as text (a JSON string keeps its bytes in jsonb). A run's messages are rebuilt by following
the bases back to the cached run, or to a run whose task carried all of its messages. A run's
messages never change, so the base's run id is the history's version: the cache is used only
under that very run, and anything else reads the database. A thread's runs are deleted only
with the thread.

The placement's parts (besides the thread and the run's position, engine/executor.py):

    "request_part": the request as ``turn_request_to_json`` writes it, with only the carried
                    messages (in the request's order),
    "history": {"base": the base run's id, or None (nothing taken from a base),
                "count": how many messages the request has,
                "spans": [[i, j, n], ...]}: messages i .. i+n-1 of the request are messages
                j .. j+n-1 of the base's; the carried messages fill the other places, in order.

Tasks of earlier versions (``request_json``, ``request``) are read as before. A worker of an
earlier version cannot read a referring task (it fails it: it never runs a shortened history):
upgrade the workers before the web processes, as for ``execute_runs`` (copilot_runtime/tasks.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson

from conversations.selectors import TASK_HISTORY_KEY, run_task_histories
from conversations.store.health import db_sync_to_async
from copilot_runtime.events.request import (
    InputMessage,
    TurnRequest,
    message_from_payload,
    message_json,
    turn_request_from_json,
    turn_request_to_json,
    turn_request_to_payload,
    turn_request_with_messages,
)
from copilot_runtime.history import HISTORIES, KnownHistory, QueuedRun, ThreadKey

__all__ = [
    "TASK_HISTORY_KEY",
    "CarriedTask",
    "HistoryUnavailable",
    "request_from_text",
    "request_rebuilt",
    "run_keeps",
    "task_carried",
    "task_placement",
]

# [i, j, n]: messages i .. i+n-1 of a request are messages j .. j+n-1 of its base's.
Span = list[int]
# The route a worker's known histories are kept under (copilot_runtime/history), and their
# form: the messages made of the payloads a task carries.
ROUTE = "task"
_MESSAGES = "task.messages"


class HistoryUnavailable(Exception):
    """A task's history cannot be rebuilt exactly (its base is gone, or its reference does not
    fit the base): the run is not executed with another history."""


# --- the web's side ---------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class CarriedTask:
    """What a Celery turn's task and run carry of its request (``task_carried``)."""

    run_id: str
    # The request's part of the placement.
    placement: dict[str, Any]
    # What the run stores for later tasks (``task_history``); None: a request that cannot be
    # written as JSON text, which no later task refers to.
    stored: dict[str, Any] | None
    # The request's messages' forms (None with ``stored``).
    forms: list[bytes] | None
    # The thread the base was queued on (None: no base).
    base_thread_pk: int | None


def task_carried(request: TurnRequest, *, thread: ThreadKey, run_id: str) -> CarriedTask:
    """The request's part of run ``run_id``'s task, referring to the last request this process
    queued on ``thread`` (as the request's known history says); called while the turn is
    stored (the run keeps ``stored``), once the request is final (its agent state decided, the
    ids its messages lacked given)."""
    sent = _queued(request.history, thread)
    messages = request.messages
    try:
        forms = [message_json(message) for message in messages]
        spans, carried = _spans(forms, messages, sent)
        part = dataclasses.replace(request, messages=[messages[i] for i in carried])
        request_part = turn_request_to_json(part)
    except TypeError:
        # A value orjson does not write (an integer over 64 bits a hook put in the state): the
        # whole request as its payload, as request_in_task carries it.
        payload = {"request": turn_request_to_payload(request)}
        return CarriedTask(run_id, payload, stored=None, forms=None, base_thread_pk=None)
    based = sent is not None and bool(spans)
    history = {"base": sent.run_id if based else None, "count": len(forms), "spans": spans}
    carried_text = b"[" + b",".join([forms[i] for i in carried]) + b"]"
    return CarriedTask(
        run_id,
        {"request_part": request_part, "history": history},
        stored={**history, "messages": carried_text.decode()},
        forms=forms,
        base_thread_pk=sent.thread_pk if based else None,
    )


def _queued(history: KnownHistory | None, thread: ThreadKey) -> QueuedRun | None:
    queued = history.queued if history is not None else None
    return queued if queued is not None and queued.thread == thread else None


def _spans(
    forms: list[bytes], messages: list[InputMessage], sent: QueuedRun | None
) -> tuple[list[Span], list[int]]:
    """Where the request's messages are found in ``sent`` (``Span``s), and the indices of
    those that are not. A re-sent history's messages are the very objects parsed before
    (copilot_runtime/history), so their forms are the same bytes objects: mostly an identity
    test per message."""
    if sent is None:
        return [], list(range(len(forms)))
    base = sent.forms
    first_at = sent.first_at
    spans: list[Span] = []
    carried: list[int] = []
    following = -1  # the base's message that would continue the last span
    for i, form in enumerate(forms):
        if 0 <= following < len(base):
            kept = base[following]
            if kept is form or kept == form:
                spans[-1][2] += 1
                following += 1
                continue
        at = first_at.get(messages[i].id)
        if at is not None:
            kept = base[at]
            if kept is form or kept == form:
                spans.append([i, at, 1])
                following = at + 1
                continue
        carried.append(i)
        following = -1
    return spans, carried


def task_placement(
    carried: CarriedTask,
    *,
    thread: ThreadKey,
    thread_pk: int,
    request: TurnRequest,
) -> dict[str, Any]:
    """The request's part of the placement, once the turn is stored on thread ``thread_pk``;
    and this run becomes the base later turns on ``thread`` refer to (its known history
    keeps it)."""
    known = request.history
    if carried.forms is None:
        if known is not None:
            known.queued = None  # its run stored nothing to refer to
        return carried.placement
    if carried.base_thread_pk is not None and carried.base_thread_pk != thread_pk:
        # The thread was deleted and made again under the same id since the base was queued:
        # the base went with the old one. Everything travels; no later task refers to this
        # run (what it stored names the lost base).
        if known is not None:
            known.queued = None
        history = {"base": None, "count": len(carried.forms), "spans": []}
        return {"request_part": turn_request_to_json(request), "history": history}
    if known is not None:
        first_at: dict[str, int] = {}
        for index, message in enumerate(request.messages):
            first_at.setdefault(message.id, index)
        known.queued = QueuedRun(thread, thread_pk, carried.run_id, carried.forms, first_at)
    return carried.placement


def run_keeps(kept: dict[str, Any] | None, carried: CarriedTask) -> dict[str, Any] | None:
    """What the run stores (``kept``, its interrupt answers) with its history part."""
    if carried.stored is None:
        return kept
    return {**(kept or {}), TASK_HISTORY_KEY: carried.stored}


# --- the worker's side ------------------------------------------------------------------------


async def request_rebuilt(*, run_id: str, placement: dict[str, Any]) -> TurnRequest:
    """The request a referring task (``"history"`` in its placement) was made of: exactly the
    web's, messages included. Raises ``HistoryUnavailable`` when that cannot be."""
    thread_pk = placement.get("thread_pk")
    if type(thread_pk) is not int:
        raise HistoryUnavailable(f"the task of run {run_id} names no stored thread")
    history = placement["history"]
    payload = orjson.loads(placement["request_part"])
    carried = payload["messages"]
    if history.get("spans"):
        base_known, base = await _base(thread_pk, history.get("base"))
        raws = _assembled(history, base_known.raws, carried)
        messages = _assembled(history, base, [message_from_payload(raw) for raw in carried])
        first = history["spans"][0]
        # Led by the base's own first messages (the usual case: the history, then the new
        # messages): known the same objects without looking at them.
        head = first[2] if first[:2] == [0, 0] else 0
        known = HISTORIES.enter(ROUTE, raws, thread=thread_pk, continues=(base_known, head))
        known.keep_each(_MESSAGES, raws, messages)
    else:
        _assembled(history, [], carried)  # checked: everything travels
        known, messages = _task_messages(carried, thread_pk)
    known.run_id = run_id  # the base later tasks of the thread name
    request = turn_request_with_messages(payload, messages)
    request.thread_pk = thread_pk
    request.history = known
    return request


def request_from_text(text: str, thread_pk: int | None) -> TurnRequest:
    """The request a task of an earlier version carries whole (``request_json``), the
    thread's history the worker knows taken as it was made."""
    if thread_pk is None:
        return turn_request_from_json(text)
    payload = orjson.loads(text)
    known, messages = _task_messages(payload["messages"], thread_pk)
    request = turn_request_with_messages(payload, messages)
    request.thread_pk = thread_pk
    request.history = known
    return request


def _task_messages(
    raws: list[dict[str, Any]], thread_pk: int
) -> tuple[KnownHistory, list[InputMessage]]:
    """The messages of a task's payloads: those of the thread's known history (equal
    payloads, copilot_runtime/history) as they were made, the others made here."""
    known = HISTORIES.enter(ROUTE, raws, thread=thread_pk)
    messages, start, stop = _made(known)
    known.keep_each(_MESSAGES, raws, messages, start, stop)
    return known, messages


async def _base(thread_pk: int, base_id: Any) -> tuple[KnownHistory, list[InputMessage]]:
    """The known history of run ``base_id``'s request, and its messages: this worker's of the
    thread when it is that run's, else read from the database."""
    cached = HISTORIES.of_thread(thread_pk)
    if cached is not None and (cached.route != ROUTE or cached.run_id is None):
        cached = None
    if cached is None or cached.run_id != base_id:
        # Another run of the thread, or none: the base's history from the database (the
        # stored parts of the runs back to the cached one, or to one that carried everything).
        parts = await db_sync_to_async(run_task_histories)(thread_pk=thread_pk)
        raws = _resolved(base_id, parts, cached)
        cached = HISTORIES.enter(ROUTE, raws, thread=thread_pk, keep=False)
    return cached, _made(cached)[0]


def _made(known: KnownHistory) -> tuple[list[InputMessage], int, int]:
    """The messages of ``known``'s payloads, as an earlier run made them where they are its
    messages (``raws[start:stop]``), and where."""
    raws = known.raws
    start, stop, made = known.reuse(_MESSAGES, raws)
    messages = [message_from_payload(raw) for raw in raws[:start]]
    messages += made
    messages += [message_from_payload(raw) for raw in raws[stop:]]
    return messages, start, stop


def _resolved(
    base_id: Any, parts: dict[str, dict[str, Any]], cached: KnownHistory | None
) -> list[dict[str, Any]]:
    """The payloads of run ``base_id``'s messages, from the runs' stored ``parts``."""
    chain: list[dict[str, Any]] = []
    run_id = base_id
    raws: list[dict[str, Any]] = []
    while run_id is not None:
        if cached is not None and run_id == cached.run_id:
            raws = cached.raws
            break
        part = parts.pop(run_id, None) if isinstance(run_id, str) else None  # each run once
        if part is None:
            raise HistoryUnavailable(f"run {run_id!r}, a task's base, stored no history")
        chain.append(part)
        run_id = part.get("base") if part.get("spans") else None
    for part in reversed(chain):
        text = part.get("messages")
        if not isinstance(text, str):
            raise HistoryUnavailable("a run's stored history has no messages")
        raws = _assembled(part, raws, orjson.loads(text))
    return raws


def _assembled(history: dict[str, Any], base: list[Any], carried: list[Any]) -> list[Any]:
    """The request's messages (or their payloads): the base's where ``history``'s spans say,
    the carried ones in the other places, in order."""
    messages: list[Any] = []
    taken = 0
    try:
        for i, j, n in history["spans"]:
            gap = i - len(messages)
            if gap < 0 or taken + gap > len(carried) or j < 0 or n <= 0 or j + n > len(base):
                raise HistoryUnavailable("a task's history does not fit its base")
            messages.extend(carried[taken : taken + gap])
            taken += gap
            messages.extend(base[j : j + n])
        messages.extend(carried[taken:])
        complete = len(messages) == history["count"]
    except (KeyError, TypeError, ValueError) as exc:
        raise HistoryUnavailable(f"a task's history reference is malformed: {exc}") from None
    if not complete:
        raise HistoryUnavailable("a task's history does not fit its base")
    return messages
