"""Recording a client's history idempotently, and a run's output messages."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Max
from django.utils import timezone

from conversations.models import (
    SET_ASIDE_KINDS,
    Message,
    MessageKind,
    MessageStatus,
    Run,
    Thread,
)
from conversations.services.threads import title_from_text
from copilot_runtime.events.request import InputMessage

# Client system/developer messages are instructions the frontend rebuilds, with a fresh id, on
# every request: they reach the model but are not part of the stored conversation.
_NOT_STORED_ROLES = frozenset({"system", "developer"})
# Signed thinking the client sends back: it rides with the history to reach the model, and is
# the frontend's copy of the reasoning row the run stored.
NOT_STORED_KINDS = frozenset({"reasoning"})


@dataclass(slots=True)
class OutputMessage:
    """A message the run produced, ready to store."""

    message_id: str
    kind: str
    role: str = ""
    content: str = ""
    action_name: str = ""
    arguments: Any = None
    parent_message_id: str = ""
    action_execution_id: str = ""
    result: str = ""
    status: str = "success"
    status_reason: str = ""
    created_at: Any = field(default_factory=timezone.now)


def _stored_history(message: InputMessage) -> bool:
    return not (message.kind == "text" and message.role in _NOT_STORED_ROLES) and (
        message.kind not in NOT_STORED_KINDS
    )


def _row_for_input(thread: Thread, message: InputMessage, position: int, run: Run) -> Message:
    return Message(
        thread=thread,
        position=position,
        message_id=message.id,
        kind=message.kind,
        role=message.role,
        content=message.content,
        action_name=message.action_name,
        arguments=message.agent_state
        if message.kind == MessageKind.AGENT_STATE
        else message.arguments,
        parent_message_id=message.parent_message_id,
        action_execution_id=message.action_execution_id,
        result=message.result,
        image_format=message.image_format,
        image_bytes=message.image_bytes,
        run=run,
        created_at=message.created_at or timezone.now(),
    )


def messages_sync_input(*, thread: Thread, messages: Iterable[InputMessage], run: Run) -> list[str]:
    """Store the client's history: new messages appended, known ones matched by id.

    When the client's history diverges from what is stored (a regenerate, an edit, a deleted
    message), the stored rows it no longer contains are marked superseded, never deleted; the
    run then works from the client's view. Returns the ids of the messages new to the thread.
    """
    history = [m for m in messages if _stored_history(m)]
    for message in history:
        if not message.id:  # a client may omit ids; never store a null one
            message.id = f"ck-{uuid.uuid4()}"
    incoming_ids = {m.id for m in history}
    # One read of what is stored decides everything below (a long thread is a few thousand
    # short tuples), so a turn costs one query here in the common case, plus the insert.
    stored = list(
        Message.objects.filter(thread=thread).values_list(
            "message_id", "superseded", "kind", "position"
        )
    )
    # Every stored current message the client no longer sends was regenerated, edited or
    # deleted on its side: superseded, kept for the record. Agent-state rows (the frontend's
    # copy of an agent's state) and reasoning are left out of the histories clients send.
    to_supersede = [
        message_id
        for message_id, superseded, kind, _ in stored
        if not superseded and kind not in SET_ASIDE_KINDS and message_id not in incoming_ids
    ]
    # A client that goes back to an earlier branch makes those messages current again.
    to_restore = [
        message_id
        for message_id, superseded, _, _ in stored
        if superseded and message_id in incoming_ids
    ]
    if to_supersede:
        Message.objects.filter(thread=thread, message_id__in=to_supersede).update(superseded=True)
        # The reasoning of a run whose messages are superseded goes with them.
        Message.objects.filter(
            thread=thread,
            kind=MessageKind.REASONING,
            superseded=False,
            run_id__in=Message.objects.filter(
                thread=thread, message_id__in=to_supersede, run_id__isnull=False
            ).values("run_id"),
        ).update(superseded=True)
    if to_restore:
        Message.objects.filter(thread=thread, message_id__in=to_restore).update(superseded=False)

    known = {message_id for message_id, _, _, _ in stored}
    next_position = max((position for _, _, _, position in stored), default=-1) + 1
    rows = []
    for message in history:
        if message.id in known:
            continue
        known.add(message.id)
        rows.append(_row_for_input(thread, message, next_position, run))
        next_position += 1
    if rows:
        Message.objects.bulk_create(rows)
    if not thread.title:
        # From the new messages only, as the PostgreSQL store does (store/pg/prepare.py).
        first_user = next((m for m in rows if m.kind == "text" and m.role == "user"), None)
        if first_user is not None and first_user.content.strip():
            thread.title = title_from_text(first_user.content)
            thread.save(update_fields=["title", "updated_at"])
    return [row.message_id for row in rows]


def _next_position(thread_id: int) -> int:
    last = Message.objects.filter(thread_id=thread_id).aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1


def messages_store_output(*, run: Run, messages: list[OutputMessage]) -> None:
    """Append a run's output messages to its thread, in order (idempotent on message id)."""
    if not messages:
        return
    thread_id = run.thread_id
    existing = set(
        Message.objects.filter(
            thread_id=thread_id, message_id__in=[m.message_id for m in messages]
        ).values_list("message_id", flat=True)
    )
    position = _next_position(thread_id)
    rows = []
    for message in messages:
        if message.message_id in existing:
            continue
        rows.append(
            Message(
                thread_id=thread_id,
                position=position,
                message_id=message.message_id,
                kind=message.kind,
                role=message.role,
                content=message.content,
                action_name=message.action_name,
                arguments=message.arguments,
                parent_message_id=message.parent_message_id,
                action_execution_id=message.action_execution_id,
                result=message.result,
                status=message.status,
                status_reason=message.status_reason,
                run=run,
                created_at=message.created_at,
            )
        )
        position += 1
    Message.objects.bulk_create(rows)


DENIED_STATUS_PREFIX = "denied by guardrails: "


def message_mark_denied(*, run_id: str, message_id: str, reason: str) -> bool:
    """Mark a user message the guardrails refused: it stays stored, failed, with the reason
    (``status_reason`` starts with "denied"). A thread it titled is untitled again (the next
    allowed message titles it). False when no such message is stored."""
    thread_id = Run.objects.filter(pk=run_id).values("thread_id")[:1]
    message = Message.objects.filter(thread_id=thread_id, message_id=message_id)
    denied = message.values_list("thread_id", "content").first()
    if denied is None:
        return False
    message.update(status=MessageStatus.FAILED, status_reason=DENIED_STATUS_PREFIX + reason)
    Thread.objects.filter(pk=denied[0], title=title_from_text(denied[1])).update(title="")
    return True
