"""The v2 thread endpoints, backed by the conversations models, with ownership.

The shapes are the TypeScript runtime's (its local runner and the Intelligence platform answer
alike). A caller sees only the threads ``thread_is_visible_to`` allows: someone else's thread is
answered exactly like one that does not exist (an empty read, a 404 for a change). Archiving
sets the thread's status; a new run on an archived thread makes it current again.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.db.models import Q, QuerySet

from conversations.models import Message, Run, Thread, ThreadStatus
from conversations.selectors import agent_state_latest, thread_get_for_caller
from conversations.services.runs import ACTIVE_STATUSES
from copilot_runtime.agui.messages import agui_messages, thread_endpoint_messages
from copilot_runtime.agui.replay import thread_history
from copilot_runtime.agui.translate import Translator, compact_events
from copilot_runtime.engine.relay import log_read
from copilot_runtime.events import event_from_payload

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
NAME_LENGTH = 255

User = AbstractBaseUser | AnonymousUser


class ThreadRequestError(ValueError):
    """A thread request the caller must fix (answered 400)."""


class ThreadIsBusy(Exception):
    """The thread has a run in progress (answered 409)."""


def _iso(value: dt.datetime) -> str:
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def thread_as_json(thread: Thread) -> dict[str, Any]:
    return {
        "id": thread.thread_id,
        "name": thread.title or None,
        "agentId": thread.agent_name,
        "organizationId": "",
        "createdById": str(thread.owner_id) if thread.owner_id is not None else "",
        "archived": thread.status == ThreadStatus.ARCHIVED,
        "createdAt": _iso(thread.created_at),
        "updatedAt": _iso(thread.updated_at),
    }


def _visible_threads(user: User) -> QuerySet[Thread]:
    if user.is_authenticated:
        return Thread.objects.filter(owner_id=user.pk)
    return Thread.objects.filter(owner__isnull=True)


@dataclass(frozen=True)
class ThreadPage:
    threads: list[dict[str, Any]]
    next_cursor: str | None


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)


def _page_cursor(thread: Thread) -> str:
    """``<updated_at in microseconds>-<pk>``: opaque to clients, safe in a query string."""
    return f"{(thread.updated_at - _EPOCH) // _MICROSECOND}-{thread.pk}"


# What ``_page_cursor`` writes: ASCII digits only (``str.isdigit`` also accepts "²"), a primary
# key that fits a bigint.
_CURSOR = re.compile(r"(\d{1,18})-(\d{1,18})", re.ASCII)


def _after_cursor(threads: QuerySet[Thread], cursor: str) -> QuerySet[Thread]:
    match = _CURSOR.fullmatch(cursor)
    if match is None:
        raise ThreadRequestError("Valid cursor query param is required")
    stamp, pk = match.groups()
    try:
        updated_at = _EPOCH + int(stamp) * _MICROSECOND
    except OverflowError:  # past year 9999: no cursor this server wrote
        raise ThreadRequestError("Valid cursor query param is required") from None
    return threads.filter(Q(updated_at__lt=updated_at) | Q(updated_at=updated_at, pk__lt=int(pk)))


def threads_list(
    *,
    user: User,
    agent_id: str | None = None,
    include_archived: bool = False,
    limit: str | None = None,
    cursor: str | None = None,
) -> ThreadPage:
    """The caller's threads, most recently updated first, ``limit`` at a time."""
    size = DEFAULT_PAGE_SIZE
    if limit:
        if not limit.isdigit() or int(limit) <= 0:
            raise ThreadRequestError("Valid limit query param is required")
        size = min(int(limit), MAX_PAGE_SIZE)
    threads = _visible_threads(user).order_by("-updated_at", "-pk")
    if agent_id:
        threads = threads.filter(agent_name=agent_id)
    if not include_archived:
        threads = threads.exclude(status=ThreadStatus.ARCHIVED)
    if cursor:
        threads = _after_cursor(threads, cursor)
    rows = list(threads[: size + 1])
    next_cursor = _page_cursor(rows[size - 1]) if len(rows) > size else None
    return ThreadPage(threads=[thread_as_json(t) for t in rows[:size]], next_cursor=next_cursor)


def thread_messages(*, user: User, thread_id: str) -> list[dict[str, Any]]:
    """The thread's current (not superseded) messages in the endpoint's shape."""
    thread = thread_get_for_caller(thread_id=thread_id, user=user)
    if thread is None:
        return []
    rows = Message.objects.filter(thread=thread, superseded=False).order_by("position")
    return thread_endpoint_messages(agui_messages(rows))


def thread_state(*, user: User, thread_id: str, agent_id: str | None = None) -> Any:
    thread = thread_get_for_caller(thread_id=thread_id, user=user)
    if thread is None:
        return None
    latest = agent_state_latest(thread=thread, agent_name=agent_id or thread.agent_name)
    return latest.state if latest is not None else None


def thread_events(*, user: User, thread_id: str) -> list[dict[str, Any]]:
    """The thread's events as ``connect`` would replay them, a running run as far as it got."""
    thread = thread_get_for_caller(thread_id=thread_id, user=user)
    if thread is None:
        return []
    history = thread_history(thread=thread)
    events = list(history.events)
    if history.active is not None:
        translator = Translator(thread_id=thread.thread_id, run_id=history.active.run_id)
        events.append(history.active.started)
        for logged in log_read(run_id=history.active.run_id, after_seq=0, limit=100_000):
            events.extend(translator.translate(event_from_payload(logged.type, logged.payload)))
    return compact_events(events)


def _thread_for_change(*, user: User, thread_id: str) -> Thread | None:
    thread = thread_get_for_caller(thread_id=thread_id, user=user)
    if thread is None:
        return None
    return Thread.objects.select_for_update().get(pk=thread.pk)


@transaction.atomic
def thread_update(*, user: User, thread_id: str, changes: Any) -> Thread | None:
    """Rename (``name``) and/or archive (``archived``); None when the caller has no such
    thread."""
    if not isinstance(changes, dict):
        raise ThreadRequestError("The request body must be a JSON object.")
    name = changes.get("name")
    archived = changes.get("archived")
    if "name" in changes and name is not None and not isinstance(name, str):
        raise ThreadRequestError("'name' must be a string or null.")
    if "archived" in changes and not isinstance(archived, bool):
        raise ThreadRequestError("'archived' must be a boolean.")
    thread = _thread_for_change(user=user, thread_id=thread_id)
    if thread is None:
        return None
    fields = ["updated_at"]
    if "name" in changes:
        thread.title = (name or "").strip()[:NAME_LENGTH]
        fields.append("title")
    if "archived" in changes:
        _set_archived(thread, archived)
        fields.append("status")
    thread.save(update_fields=fields)
    return thread


def _set_archived(thread: Thread, archived: bool) -> None:
    if archived:
        thread.status = ThreadStatus.ARCHIVED
    elif thread.status == ThreadStatus.ARCHIVED:
        thread.status = ThreadStatus.IDLE


@transaction.atomic
def thread_archive(*, user: User, thread_id: str) -> bool:
    thread = _thread_for_change(user=user, thread_id=thread_id)
    if thread is None:
        return False
    _set_archived(thread, True)
    thread.save(update_fields=["status", "updated_at"])
    return True


@transaction.atomic
def thread_delete(*, user: User, thread_id: str) -> bool:
    """Delete the thread with its messages, runs and logs; refused while a run is going."""
    thread = _thread_for_change(user=user, thread_id=thread_id)
    if thread is None:
        return False
    if Run.objects.filter(thread=thread, status__in=ACTIVE_STATUSES).exists():
        raise ThreadIsBusy
    thread.delete()
    return True
