"""The message ids a turn's history carries, and what this process knows its thread holds.

A client re-sends the whole history with every turn. ``stored_by_id`` reads it once per new
message, not once per turn; ``remember_known`` records, after a turn's write, that every id it
carried is stored and current, so that the next turn's look-up asks only about its new ones
(``conversations/store/known.py``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from conversations.models import MessageKind
from conversations.services.messages import _NOT_STORED_ROLES
from conversations.store.known import KNOWN, KnownHistory, ThreadKey
from copilot_runtime.events.recent import PrefixMemo, first_input_id

# What ``stored_by_id`` made of a history, for the next turn re-sending the same messages.
STORED_BY_ID: PrefixMemo[dict[str, Any]] = PrefixMemo(first_id=first_input_id)


def stored_by_id(messages: list[Any]) -> dict[str, Any]:
    """The history's stored kinds by id, each id's first message (a client repeating an id
    stores it once), in order. A history re-sent with the next turn resumes after the messages
    the last turn's pass went over (``PrefixMemo``): the pass costs the new messages, not the
    thread. The dict returned may be the one kept: callers must not change it."""
    done, kept = STORED_BY_ID.resume(messages)
    if done == len(messages) and kept is not None:
        return kept
    first_of: dict[str, Any] = dict(kept) if kept is not None else {}
    minted = False
    for message in messages[done:] if done else messages:
        if message.kind == "text" and message.role in _NOT_STORED_ROLES:
            continue
        if not message.id:  # a client may omit ids; never store a null one
            message.id = f"ck-{uuid.uuid4()}"
            minted = True
        if message.id not in first_of:
            first_of[message.id] = message
    if not minted:  # an id minted here is this turn's own: never resumed from
        STORED_BY_ID.keep(messages, first_of)
    return first_of


def remember_known(
    thread_key: ThreadKey,
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
    the request now gives it would not: then nothing is remembered); the missing ones were
    just written. Only the ids asked about are looked at one by one."""
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
        KNOWN.forget(thread_key)
        return
    known_before = frozenset(first_of).difference(asked)
    KNOWN.remember(
        thread_key,
        KnownHistory(thread_pk=thread_pk, version=version, ids=known_before.union(added)),
    )
