"""Remembering what was made of the history messages clients send again with every turn.

Both CopilotKit clients re-send the whole conversation with each request, so a thread's 120th
turn carries 239 messages the runtime has already checked and converted. Checking and
converting them again is what made a turn's cost grow with the thread. ``Recent`` keeps, per
message id, the raw message and what was made of it; a message equal to the one remembered
(compared in C, far cheaper than the check) gets the same result back. A message with another
content under the same id is simply made again.

What is remembered must be a pure function of the raw message and never be mutated by its
users (the converted messages are read-only past their parsing).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

Made = TypeVar("Made")

# About the live history of 50 conversations of 40 turns; a few megabytes at most.
DEFAULT_SIZE = 4096


class Recent(Generic[Made]):
    """A bounded map from message id to (raw message, what was made of it), least recently
    used out first. Used from the event loop's thread only."""

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self._size = size
        self._items: OrderedDict[str, tuple[Any, Made]] = OrderedDict()

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
        seen = self._items.get(key)
        if seen is not None and seen[0] == raw:
            self._items.move_to_end(key)
            return True, seen[1]
        return False, None

    def keep(self, key: Any, raw: Any, made: Made) -> None:
        if type(key) is not str or not key:
            return
        items = self._items
        items[key] = (raw, made)
        items.move_to_end(key)
        if len(items) > self._size:
            items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
