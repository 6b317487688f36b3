"""The message ids a turn's history carries, and what this process knows its thread holds.

A client re-sends the whole history with every turn. ``stored_by_id`` reads it once per new
message, not once per turn; ``known_ids`` gives the ids the request's known history
(copilot_runtime/history) says the thread holds as current, so that the turn's look-up asks the
database about the other ids only; ``remember_stored`` records, after a turn's write, that
every id it carried is stored and current, at the thread's history version (migration 0009: a
trigger draws a new version whenever a statement changes or deletes the thread's messages,
whoever runs it). Another process adding messages to the thread leaves the version as it is,
and those ids are simply not known here: they are asked about.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from conversations.models import MessageKind
from conversations.services.messages import _NOT_STORED_ROLES, NOT_STORED_KINDS
from copilot_runtime.history import KnownHistory, StoredIds, ThreadKey

# The form of a known history this pass makes: the stored kinds by id after its messages.
_STORED_BY_ID = "stored_by_id"


def stored_by_id(messages: list[Any], history: KnownHistory | None) -> dict[str, Any]:
    """The history's stored kinds by id, each id's first message (a client repeating an id
    stores it once), in order. A history re-sent with the next turn resumes after the messages
    the last turn's pass went over (``history``): the pass costs the new messages, not the
    thread. The dict returned may be the one kept: callers must not change it."""
    done, kept = history.resume(_STORED_BY_ID, messages) if history is not None else (0, None)
    if done == len(messages) and kept is not None:
        return kept
    first_of: dict[str, Any] = dict(kept) if kept is not None else {}
    minted = False
    for message in messages[done:] if done else messages:
        if message.kind == "text" and message.role in _NOT_STORED_ROLES:
            continue
        if message.kind in NOT_STORED_KINDS:
            continue
        if not message.id:  # a client may omit ids; never store a null one
            message.id = f"ck-{uuid.uuid4()}"
            minted = True
        if message.id not in first_of:
            first_of[message.id] = message
    if history is not None and not minted:  # an id minted here is this turn's own
        history.keep(_STORED_BY_ID, messages, first_of)
    return first_of


def known_ids(history: KnownHistory | None, thread: ThreadKey) -> StoredIds | None:
    """What the request's history says ``thread`` holds, if it says it of that thread."""
    stored = history.stored if history is not None else None
    return stored if stored is not None and stored.thread == thread else None


def remember_stored(
    history: KnownHistory | None,
    thread: ThreadKey,
    thread_pk: int,
    version: int,
    first_of: dict[str, Any],
    asked: list[str],
    missing: Sequence[str] | None,
    probed_current: int,
) -> None:
    """After a turn stored without superseding anything: every id the request carried is now
    stored, and each one not an agent state is current, at ``version`` (adding messages leaves
    it as it is). The ids known before are; of the ids asked about, those the look-up found
    are, and the database's count of them must agree (an id stored under another kind than
    the request now gives it would not: then nothing is known); the missing ones were just
    written. Only the ids asked about are looked at one by one."""
    if history is None:
        return
    not_stored = set(missing or ())
    carried = 0
    added: list[str] = []
    for message_id in asked:
        if first_of[message_id].kind == MessageKind.AGENT_STATE:
            continue
        added.append(message_id)
        if message_id not in not_stored:
            carried += 1
    if carried != probed_current:
        history.stored = None
        return
    known_before = frozenset(first_of).difference(asked)
    history.stored = StoredIds(thread, thread_pk, version, known_before.union(added))
