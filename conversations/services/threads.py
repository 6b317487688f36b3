"""Threads: found or created for a caller, with ownership."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.db.models import QuerySet

from conversations.models import ACTIVE_STATUSES, Run, Thread, ThreadStatus

TITLE_LENGTH = 80


def thread_is_visible_to(thread: Thread, user: AbstractBaseUser | AnonymousUser) -> bool:
    """Owners see their threads; anonymous threads are visible to anonymous callers only."""
    if thread.owner_id is None:
        return not user.is_authenticated
    return user.is_authenticated and thread.owner_id == user.pk


def threads_of_caller(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Thread]:
    """The caller's namespace of thread ids: their own threads, or the anonymous ones. Every
    look-up by a client's thread id goes through it, so another caller's id is simply not
    there (migration 0012: ids are unique per owner)."""
    if user.is_authenticated:
        return Thread.objects.filter(owner_id=user.pk)
    return Thread.objects.filter(owner__isnull=True)


def thread_get_or_create_for_turn(
    *, thread_id: str, user: AbstractBaseUser | AnonymousUser, agent_name: str
) -> Thread:
    """The caller's thread ``thread_id``, created on first use (another caller's thread of the
    same id is not theirs and stays untouched). Call inside a transaction: the row is locked
    so two requests on one thread are serialised."""
    owner = user if user.is_authenticated else None
    thread, _created = Thread.objects.select_for_update().get_or_create(
        thread_id=thread_id, owner=owner, defaults={"agent_name": agent_name}
    )
    return thread


def title_from_text(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1] + "…"


@transaction.atomic
def thread_metadata_set(*, thread_pk: int, key: str, value: Any) -> bool:
    """Set ``metadata[key]`` on the thread (locked, so concurrent writers of other keys are
    kept); False when no such thread exists or the value is already there. By primary key: a
    client's thread id names a thread only together with its owner."""
    thread = Thread.objects.select_for_update().filter(pk=thread_pk).first()
    if thread is None or thread.metadata.get(key) == value:
        return False
    thread.metadata = {**thread.metadata, key: value}
    thread.save(update_fields=["metadata"])
    return True


@transaction.atomic
def thread_metadata_setdefault(*, thread_pk: int, key: str, value: Any) -> Any:
    """``metadata[key]``, set to ``value`` first when the thread holds none (locked, as
    ``thread_metadata_set``); None when no such thread exists."""
    thread = Thread.objects.select_for_update().filter(pk=thread_pk).first()
    if thread is None:
        return None
    if key not in thread.metadata:
        thread.metadata = {**thread.metadata, key: value}
        thread.save(update_fields=["metadata"])
    return thread.metadata[key]


# --- changes a caller makes to their own threads ------------------------------------------------

NAME_LENGTH = 255


class ThreadIsBusy(Exception):
    """The thread has a run in progress."""


def _thread_for_change(*, user: AbstractBaseUser | AnonymousUser, thread_id: str) -> Thread | None:
    """The caller's thread, locked for the change; None when the caller has no such thread
    (someone else's is answered the same)."""
    return threads_of_caller(user).select_for_update().filter(thread_id=thread_id).first()


def _set_archived(thread: Thread, archived: bool) -> None:
    if archived:
        thread.status = ThreadStatus.ARCHIVED
    elif thread.status == ThreadStatus.ARCHIVED:
        thread.status = ThreadStatus.IDLE


_UNCHANGED: Any = object()


@transaction.atomic
def do_thread_change(
    *,
    user: AbstractBaseUser | AnonymousUser,
    thread_id: str,
    title: str | None = _UNCHANGED,
    archived: bool | None = None,
) -> Thread | None:
    """Rename (``title``; None clears it) and/or archive or restore the thread."""
    thread = _thread_for_change(user=user, thread_id=thread_id)
    if thread is None:
        return None
    fields = ["updated_at"]
    if title is not _UNCHANGED:
        thread.title = (title or "").strip()[:NAME_LENGTH]
        fields.append("title")
    if archived is not None:
        _set_archived(thread, archived)
        fields.append("status")
    thread.save(update_fields=fields)
    return thread


@transaction.atomic
def do_thread_delete(*, user: AbstractBaseUser | AnonymousUser, thread_id: str) -> bool:
    """Delete the thread with its messages, runs and logs; refused while a run is going."""
    thread = _thread_for_change(user=user, thread_id=thread_id)
    if thread is None:
        return False
    if Run.objects.filter(thread=thread, status__in=ACTIVE_STATUSES).exists():
        raise ThreadIsBusy
    thread.delete()
    return True
