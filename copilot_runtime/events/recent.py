"""Remembering what was made of the history messages clients send again with every turn.

Both CopilotKit clients re-send the whole conversation with each request, so a thread's 120th
turn carries 239 messages the runtime has already checked and converted. Checking and
converting them again is what made a turn's cost grow with the thread. ``Recent`` keeps, per
message id, the raw message and what was made of it; a message equal to the one remembered
(compared in C, far cheaper than the check) gets the same result back. A message with another
content under the same id is simply made again.

Every ``Recent`` of the process draws on one ``RecentStore``: the bound is on the remembered
messages of the process, whichever protocol they came by. Separate bounds per protocol held
both full in a process serving both (about 8 MiB at 4,096 messages each) where the live
history of its conversations needs one.

What is remembered must be a pure function of the raw message and never be mutated by its
users (the converted messages are read-only past their parsing).
"""

from __future__ import annotations

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

    def resize(self, size: int) -> None:
        """A new bound (0 or less: nothing is remembered), the oldest entries out at once."""
        self.size = max(0, size)
        while len(self.items) > self.size:
            self.items.popitem(last=False)

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

    def keep(self, key: Any, raw: Any, made: Made) -> None:
        if type(key) is not str or not key:
            return
        store = self.store
        items = store.items
        items[key] = (self, raw, made)
        items.move_to_end(key)
        if len(items) > store.size:
            items.popitem(last=False)
