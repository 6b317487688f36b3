"""The v2 thread endpoints in the TypeScript runtime's shapes, on the conversations selectors
and services (which apply ownership).

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

from conversations.models import Thread, ThreadStatus
from conversations.selectors import (
    agent_state_latest,
    thread_current_messages,
    thread_get_for_caller,
    threads_for_caller,
)
from conversations.services.threads import ThreadIsBusy, do_thread_change, do_thread_delete
from copilot_runtime.agui.messages import agui_messages, thread_endpoint_messages
from copilot_runtime.agui.replay import thread_history
from copilot_runtime.agui.translate import Translator, compact_events
from copilot_runtime.client_numbers import ClientNumberError, parse_client_int
from copilot_runtime.events import event_from_payload
from copilot_runtime.runs.relay import log_read

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
# A larger ``limit`` is served MAX_PAGE_SIZE at a time; past the largest integer a JavaScript
# client writes exactly it is no limit a client meant, and refused.
_LIMIT_READ_MAX = 2**53 - 1

__all__ = ["ThreadIsBusy", "ThreadRequestError"]

User = AbstractBaseUser | AnonymousUser


class ThreadRequestError(ValueError):
    """A thread request the caller must fix (answered 400)."""


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


def _cursor_position(cursor: str) -> tuple[dt.datetime, int]:
    match = _CURSOR.fullmatch(cursor)
    if match is None:
        raise ThreadRequestError("Valid cursor query param is required")
    stamp, pk = match.groups()
    try:
        updated_at = _EPOCH + int(stamp) * _MICROSECOND
    except OverflowError:  # past year 9999: no cursor this server wrote
        raise ThreadRequestError("Valid cursor query param is required") from None
    return updated_at, int(pk)


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
        try:
            asked = parse_client_int(limit, minimum=1, maximum=_LIMIT_READ_MAX)
        except ClientNumberError:
            raise ThreadRequestError("Valid limit query param is required") from None
        size = min(asked, MAX_PAGE_SIZE)
    rows = threads_for_caller(
        user=user,
        agent_name=agent_id,
        include_archived=include_archived,
        after=_cursor_position(cursor) if cursor else None,
        limit=size + 1,
    )
    next_cursor = _page_cursor(rows[size - 1]) if len(rows) > size else None
    return ThreadPage(threads=[thread_as_json(t) for t in rows[:size]], next_cursor=next_cursor)


def thread_messages(*, user: User, thread_id: str) -> list[dict[str, Any]]:
    """The thread's current (not superseded) messages in the endpoint's shape."""
    thread = thread_get_for_caller(thread_id=thread_id, user=user)
    if thread is None:
        return []
    rows = thread_current_messages(thread=thread)
    return thread_endpoint_messages(agui_messages(rows, reasoning=True))


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
    renamed = {"title": name} if "name" in changes else {}
    return do_thread_change(user=user, thread_id=thread_id, archived=archived, **renamed)


def thread_archive(*, user: User, thread_id: str) -> bool:
    return do_thread_change(user=user, thread_id=thread_id, archived=True) is not None


def thread_delete(*, user: User, thread_id: str) -> bool:
    """Delete the thread with its messages, runs and logs; refused while a run is going."""
    return do_thread_delete(user=user, thread_id=thread_id)
