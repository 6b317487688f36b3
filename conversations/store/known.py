"""What a web process knows a thread holds: its current messages' ids, at a history version.

A client re-sends the whole conversation with every turn. Asking the database which of those
ids the thread holds costs an index probe per id, and on a database that has served a while
(the full benchmark's, after its 50-user rows) that was most of what made a long thread's
turn slower than a short one's: about 0.4 ms of a v2 turn's first token at 240 messages.

After a turn's look-up and write, the process knows every id the request carried is stored
and current, as of the thread's ``history_version`` (migration 0009: a trigger draws a new
version whenever a statement updates or deletes the thread's messages, whoever runs it). The
next turn on the thread asks only about the other ids and checks the version: unchanged, the
ids known are still stored and current; changed, the look-up is asked again, whole. Another
process adding messages to the thread leaves the version as it is, and those ids are simply
not known here: they are asked about.

Kept per thread by (owner, client thread id): client thread ids are unique per owner only
(migration 0012), and two owners' threads of one id are two histories.

Bounded, least recently used out first, by the REMEMBERED_MESSAGES setting in ids (the sets
hold the id strings the remembered messages hold already). Used from event loops' threads:
each operation is a few dict operations the GIL keeps whole.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

from copilot_runtime.events.recent import MESSAGES, RecentStore

# (the owner's primary key, None for anonymous callers; the client's thread id)
ThreadKey = tuple[int | None, str]


class KnownHistory(NamedTuple):
    thread_pk: int
    version: int
    ids: frozenset[str]


class KnownHistories:
    """Per thread (``ThreadKey``), the ``KnownHistory`` of the last turn this process stored
    on it."""

    def __init__(self, store: RecentStore = MESSAGES) -> None:
        self._store = store  # its size bounds the ids kept here
        self._known: OrderedDict[ThreadKey, KnownHistory] = OrderedDict()
        self._count = 0

    def __len__(self) -> int:
        return len(self._known)

    def get(self, thread: ThreadKey) -> KnownHistory | None:
        known = self._known.get(thread)
        if known is not None:
            self._known.move_to_end(thread)
        return known

    def remember(self, thread: ThreadKey, known: KnownHistory) -> None:
        self.forget(thread)
        if len(known.ids) > self._store.size:
            return
        self._known[thread] = known
        self._count += len(known.ids)
        while self._count > self._store.size:
            _thread, dropped = self._known.popitem(last=False)
            self._count -= len(dropped.ids)

    def forget(self, thread: ThreadKey) -> None:
        dropped = self._known.pop(thread, None)
        if dropped is not None:
            self._count -= len(dropped.ids)

    def clear(self) -> None:
        self._known.clear()
        self._count = 0


KNOWN = KnownHistories()
