"""Remembering what was made of the history messages clients send again with every turn.

Both CopilotKit clients re-send the whole conversation with each request, so a thread's 120th
turn carries 239 messages the runtime has already checked and converted. Checking and
converting them again is what made a turn's cost grow with the thread. ``Recent`` keeps, per
message id, the raw message and what was made of it; a message equal to the one remembered
(compared in C, far cheaper than the check) gets the same result back. A message with another
content under the same id is simply made again.

Looked up message by message, recognising the history still cost a Python step per message
(about 1 microsecond each in a loaded server): 0.3 ms of a v1 turn at 240 messages. So a
``Recent`` also keeps whole histories, keyed by their first message's id: a request whose first
messages equal, as one list compared in C, the history kept before gets what was made of all of
them at once, and only its new messages are looked up one by one.

Every ``Recent`` of the process draws on one ``RecentStore``: the bound is on the remembered
messages of the process, whichever protocol they came by. Separate bounds per protocol held
both full in a process serving both (about 8 MiB at 4,096 messages each) where the live
history of its conversations needs one.

What is remembered must be a pure function of the raw message and never be mutated by its
users (the converted messages are read-only past their parsing).
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

Made = TypeVar("Made")

# About the live history of 50 conversations of 40 turns: 3-5 MiB when full. The process's
# bound is the REMEMBERED_MESSAGES setting (copilot_runtime/conf.py), applied at start-up.
DEFAULT_SIZE = 4096


class RecentStore:
    """A bounded map from message id to (its ``Recent``, raw message, what was made of it),
    least recently used out first. Used from the event loop's thread only.

    Keyed by the message id alone (the clients' ids are UUIDs): were two ``Recent`` to see
    the same id, each would replace the other's entry, never take it for its own."""

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self.size = size
        self.items: OrderedDict[str, tuple[Recent[Any], Any, Any]] = OrderedDict()
        # Whole histories, by (their Recent, their first message's id): the raw messages and
        # what was made of each. Bounded apart from ``items`` by the same number, counted in
        # messages; they mostly hold the same objects as ``items``.
        self.histories: OrderedDict[tuple[Recent[Any], str], tuple[list[Any], list[Any]]] = (
            OrderedDict()
        )
        self.history_messages = 0

    def resize(self, size: int) -> None:
        """A new bound (0 or less: nothing is remembered), the oldest entries out at once."""
        self.size = max(0, size)
        while len(self.items) > self.size:
            self.items.popitem(last=False)
        self.trim_histories()

    def trim_histories(self) -> None:
        while self.histories and self.history_messages > self.size:
            _key, (raws, _made) = self.histories.popitem(last=False)
            self.history_messages -= len(raws)

    def __len__(self) -> int:
        return len(self.items)


# The process's remembered history messages, both protocols together.
MESSAGES = RecentStore()


class Recent(Generic[Made]):
    """What one kind of check or conversion made of the messages in ``store``."""

    def __init__(self, store: RecentStore = MESSAGES) -> None:
        self.store = store

    def made_from(self, key: Any, raw: Any, make: Callable[[Any], Made]) -> Made:
        """``make(raw)``, or what it gave for an equal ``raw`` under the same ``key``."""
        found, made = self.recall(key, raw)
        if found:
            return made  # type: ignore[return-value]
        made = make(raw)
        self.keep(key, raw, made)
        return made

    def recall(self, key: Any, raw: Any) -> tuple[bool, Made | None]:
        """(True, what was made) for a ``raw`` equal to the one kept under ``key``."""
        if type(key) is not str or not key:
            return False, None  # no id: nothing to recognise it by
        items = self.store.items
        seen = items.get(key)
        if seen is None or seen[0] is not self:
            return False, None
        if seen[1] is not raw:
            if seen[1] != raw:
                return False, None
            # Kept with this request's own (equal) message: a second look-up of it in the same
            # request (the v1 check, then the parse) is an identity test, not a comparison.
            items[key] = (self, raw, seen[2])
        items.move_to_end(key)
        return True, seen[2]

    def history_prefix(self, raws: list[Any]) -> tuple[int, list[Made]]:
        """How many of the first messages of ``raws`` equal the last history kept with the
        same first message (``keep_history``), and what was made of them.

        The whole prefix is compared as one list, in C: a thread's 120th turn recognises its
        239 earlier messages without a Python step per message. Anything else (an edit, a
        regenerate, another thread) gives 0, and each message is looked up on its own."""
        if not raws or not isinstance(raws[0], dict):
            return 0, []
        first = raws[0].get("id")
        if type(first) is not str:
            return 0, []
        histories = self.store.histories
        key = (self, first)
        seen = histories.get(key)
        if seen is None:
            return 0, []
        kept, made = seen
        count = len(kept)
        prefix = raws[:count]
        if count > len(raws) or prefix != kept:
            return 0, []
        # Kept with this request's own (equal) messages: a second look-up in the same request
        # (the v1 check, then the parse) compares identical objects, which is immediate.
        histories[key] = (prefix, made)
        histories.move_to_end(key)
        return count, made

    def keep_history(
        self,
        raws: list[Any],
        made: list[Made],
        *,
        known: int,
        rememberable: Callable[[Any], bool],
    ) -> None:
        """Keep ``made[i]``, made of ``raws[i]``, for ``history_prefix``: up to the first
        message that is not ``rememberable`` (one with no id is made anew every time). The
        first ``known`` messages are the prefix ``history_prefix`` recognised: not asked
        again."""
        count = known
        for raw in raws[known:]:
            if not rememberable(raw):
                break
            count += 1
        store = self.store
        if count == 0 or count > store.size:
            return
        key = (self, raws[0]["id"])
        histories = store.histories
        old = histories.pop(key, None)
        if old is not None:
            store.history_messages -= len(old[0])
        histories[key] = (raws[:count], made[:count])
        store.history_messages += count
        store.trim_histories()

    def keep(self, key: Any, raw: Any, made: Made) -> None:
        if type(key) is not str or not key:
            return
        store = self.store
        items = store.items
        items[key] = (self, raw, made)
        items.move_to_end(key)
        if len(items) > store.size:
            items.popitem(last=False)


State = TypeVar("State")


class PrefixMemo(Generic[State]):
    """What one pass over a history left after its messages (``State``), for the next history
    that starts with the very same message objects.

    A history re-sent unchanged comes back as the same objects (``ResentHistories`` in
    copilot_runtime/http/resent.py, then ``Recent``), so a pass that only depends on the
    messages before each one (converting them in order) resumes where the last one stopped:
    its cost is the new messages', not the thread's. Keyed by the first message's id
    (``first_id``: of a raw message by default); the messages are compared by identity (one C
    step each), never by value. The state is shared by every resumption: its users copy what
    they change. Bounded with ``Recent`` by the REMEMBERED_MESSAGES setting, in messages.
    """

    def __init__(
        self,
        store: RecentStore = MESSAGES,
        *,
        first_id: Callable[[list[Any]], str | None] | None = None,
    ) -> None:
        self.store = store
        self._first_id = first_id or _first_id
        self._kept: OrderedDict[str, tuple[list[Any], State]] = OrderedDict()
        self._count = 0

    def resume(self, messages: list[Any]) -> tuple[int, State | None]:
        """How many first messages of ``messages`` are those of the history kept under the
        same first id, and the state after them (0 and None: none)."""
        key = self._first_id(messages)
        if key is None:
            return 0, None
        seen = self._kept.get(key)
        if seen is None:
            return 0, None
        kept, state = seen
        if len(kept) > len(messages) or not all(map(operator.is_, kept, messages)):
            return 0, None
        self._kept.move_to_end(key)
        return len(kept), state

    def keep(self, messages: list[Any], state: State) -> None:
        """``state`` is what the pass left after all of ``messages``."""
        key = self._first_id(messages)
        if key is None or len(messages) > self.store.size:
            return
        old = self._kept.pop(key, None)
        if old is not None:
            self._count -= len(old[0])
        self._kept[key] = (list(messages), state)
        self._count += len(messages)
        while self._kept and self._count > self.store.size:
            _key, (dropped, _state) = self._kept.popitem(last=False)
            self._count -= len(dropped)


def first_input_id(messages: list[Any]) -> str | None:
    """``PrefixMemo``'s key for a history of converted messages (``InputMessage``)."""
    return messages[0].id or None if messages else None


def _first_id(messages: list[Any]) -> str | None:
    first = messages[0] if messages else None
    message_id = first.get("id") if type(first) is dict else None
    return message_id if type(message_id) is str and message_id else None
