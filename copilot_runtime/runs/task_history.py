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
very values the web parsed. So the web remembers, per thread, the forms of the last request it
queued (``SentHistories``), and the task names that run as its ``base``.

The worker finds the base in its own cache (``ExecutedHistories``: per thread, the messages of
the last run it executed, usually the base itself) or in the database: every run stores, in its
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
from collections import OrderedDict
from typing import Any, NamedTuple

from conversations.selectors import TASK_HISTORY_KEY, run_task_histories
from conversations.store.health import db_sync_to_async
from conversations.store.known import ThreadKey
from copilot_runtime.events.recent import MESSAGES, RecentStore
from copilot_runtime.events.request import (
    InputMessage,
    TurnRequest,
    message_json,
    messages_from_json,
    turn_request_from_json,
    turn_request_to_json,
    turn_request_to_payload,
)

__all__ = [
    "TASK_HISTORY_KEY",
    "CarriedTask",
    "HistoryUnavailable",
    "request_rebuilt",
    "run_keeps",
    "task_carried",
    "task_placement",
]

# [i, j, n]: messages i .. i+n-1 of a request are messages j .. j+n-1 of its base's.
Span = list[int]


class HistoryUnavailable(Exception):
    """A task's history cannot be rebuilt exactly (its base is gone, or its reference does not
    fit the base): the run is not executed with another history."""


# --- the web's side ---------------------------------------------------------------------------


class _Sent(NamedTuple):
    """The last request this process queued on a thread: what a later one may refer to."""

    thread_pk: int
    run_id: str
    forms: list[bytes]  # its messages' JSON forms, in order
    first_at: dict[str, int]  # where each message id first comes in them


class SentHistories:
    """Per thread (owner, client thread id), the last request this process queued on it, least
    recently used out first; bounded, as the other memories of histories, by the
    REMEMBERED_MESSAGES setting, in messages (the forms are the messages' own cached bytes)."""

    def __init__(self, store: RecentStore = MESSAGES) -> None:
        self._store = store
        self._sent: OrderedDict[ThreadKey, _Sent] = OrderedDict()
        self._count = 0

    def __len__(self) -> int:
        return len(self._sent)

    def get(self, thread: ThreadKey) -> _Sent | None:
        # A plain look-up: the ORM store asks from its own thread, inside its transaction.
        return self._sent.get(thread)

    def remember(self, thread: ThreadKey, sent: _Sent) -> None:
        self.forget(thread)
        if len(sent.forms) > self._store.size:
            return
        self._sent[thread] = sent
        self._count += len(sent.forms)
        while self._count > self._store.size:
            _thread, dropped = self._sent.popitem(last=False)
            self._count -= len(dropped.forms)

    def forget(self, thread: ThreadKey) -> None:
        dropped = self._sent.pop(thread, None)
        if dropped is not None:
            self._count -= len(dropped.forms)

    def clear(self) -> None:
        self._sent.clear()
        self._count = 0


SENT = SentHistories()


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
    queued on ``thread``; called while the turn is stored (the run keeps ``stored``), once the
    request is final (its agent state decided, the ids its messages lacked given)."""
    sent = SENT.get(thread)
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


def _spans(
    forms: list[bytes], messages: list[InputMessage], sent: _Sent | None
) -> tuple[list[Span], list[int]]:
    """Where the request's messages are found in ``sent`` (``Span``s), and the indices of
    those that are not. A re-sent history's messages are the very objects parsed before
    (copilot_runtime/events/recent.py), so their forms are the same bytes objects: mostly an
    identity test per message."""
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
    and this run becomes the base later turns on ``thread`` refer to."""
    if carried.forms is None:
        SENT.forget(thread)  # its run stored nothing to refer to
        return carried.placement
    if carried.base_thread_pk is not None and carried.base_thread_pk != thread_pk:
        # The thread was deleted and made again under the same id since the base was queued:
        # the base went with the old one. Everything travels; no later task refers to this
        # run (what it stored names the lost base).
        SENT.forget(thread)
        history = {"base": None, "count": len(carried.forms), "spans": []}
        return {"request_part": turn_request_to_json(request), "history": history}
    first_at: dict[str, int] = {}
    for index, message in enumerate(request.messages):
        first_at.setdefault(message.id, index)
    SENT.remember(thread, _Sent(thread_pk, carried.run_id, carried.forms, first_at))
    return carried.placement


def run_keeps(kept: dict[str, Any] | None, carried: CarriedTask) -> dict[str, Any] | None:
    """What the run stores (``kept``, its interrupt answers) with its history part."""
    if carried.stored is None:
        return kept
    return {**(kept or {}), TASK_HISTORY_KEY: carried.stored}


# --- the worker's side ------------------------------------------------------------------------


class _Executed(NamedTuple):
    run_id: str
    messages: list[InputMessage]


class ExecutedHistories:
    """Per stored thread, the messages of the last run this process rebuilt on it, least
    recently used out first; bounded by the REMEMBERED_MESSAGES setting, in messages. The
    messages are shared with the runs (read-only past their parsing, as every remembered
    message is), so the next run's conversion resumes after them (model_messages.py)."""

    def __init__(self, store: RecentStore = MESSAGES) -> None:
        self._store = store
        self._executed: OrderedDict[int, _Executed] = OrderedDict()
        self._count = 0

    def __len__(self) -> int:
        return len(self._executed)

    def get(self, thread_pk: int) -> _Executed | None:
        found = self._executed.get(thread_pk)
        if found is not None:
            self._executed.move_to_end(thread_pk)
        return found

    def remember(self, thread_pk: int, run_id: str, messages: list[InputMessage]) -> None:
        dropped = self._executed.pop(thread_pk, None)
        if dropped is not None:
            self._count -= len(dropped.messages)
        if len(messages) > self._store.size:
            return
        # A copy: the run owns its request's list; the messages themselves are shared.
        self._executed[thread_pk] = _Executed(run_id, list(messages))
        self._count += len(messages)
        while self._count > self._store.size:
            _thread, old = self._executed.popitem(last=False)
            self._count -= len(old.messages)

    def clear(self) -> None:
        self._executed.clear()
        self._count = 0


EXECUTED = ExecutedHistories()


async def request_rebuilt(*, run_id: str, placement: dict[str, Any]) -> TurnRequest:
    """The request a referring task (``"history"`` in its placement) was made of: exactly the
    web's, messages included. Raises ``HistoryUnavailable`` when that cannot be."""
    thread_pk = placement.get("thread_pk")
    if type(thread_pk) is not int:
        raise HistoryUnavailable(f"the task of run {run_id} names no stored thread")
    history = placement["history"]
    request = turn_request_from_json(placement["request_part"])
    base: list[InputMessage] = []
    if history.get("spans"):
        base = await _base_messages(thread_pk, history.get("base"))
    request.messages = _assembled(history, base, request.messages)
    request.thread_pk = thread_pk
    EXECUTED.remember(thread_pk, run_id, request.messages)
    return request


async def _base_messages(thread_pk: int, base_id: Any) -> list[InputMessage]:
    cached = EXECUTED.get(thread_pk)
    if cached is not None and cached.run_id == base_id:
        return cached.messages
    # Another run of the thread, or none: the base's history from the database (the stored
    # parts of the runs back to the cached one, or to one that carried everything).
    parts = await db_sync_to_async(run_task_histories)(thread_pk=thread_pk)
    return _resolved(base_id, parts, cached)


def _resolved(
    base_id: Any, parts: dict[str, dict[str, Any]], cached: _Executed | None
) -> list[InputMessage]:
    """The messages of run ``base_id``, from the runs' stored ``parts``."""
    chain: list[dict[str, Any]] = []
    run_id = base_id
    messages: list[InputMessage] = []
    while run_id is not None:
        if cached is not None and run_id == cached.run_id:
            messages = cached.messages
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
        messages = _assembled(part, messages, messages_from_json(text))
    return messages


def _assembled(
    history: dict[str, Any], base: list[InputMessage], carried: list[InputMessage]
) -> list[InputMessage]:
    """The request's messages: the base's where ``history``'s spans say, the carried ones in
    the other places, in order."""
    messages: list[InputMessage] = []
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
