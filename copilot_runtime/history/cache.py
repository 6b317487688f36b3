"""The process's one cache of known histories (``HISTORIES``), bounded by REMEMBERED_MESSAGES.

A request's history enters here once, where the request enters (``enter``): the history the
same thread's previous request left, or the last one that began with the same message, is
recognised as the start of this one, and a new ``KnownHistory`` takes what was made of the
messages they share and the thread's facts, in place of the old one. It is handed down with
the request from there; nothing below the protocol surfaces looks a history up, save a worker
finding the history a run's task refers to (``of_thread``).

A history is found by its thread (``("thread", key)``) and by its first and second messages'
ids, per route (``("first" | "second", route, id)``: v1 sends its instructions first under a
fresh id in every request, so its history proper starts at the second message). One
least-recently-used order holds every history under any key, bounded in messages: the bound
is on what the process remembers of all its threads, whichever protocol they came by.

Used from event loops' threads: each operation is a few dict operations the GIL keeps whole.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from copilot_runtime.history.known import BodyRead, KnownHistory, ThreadKey

# About the live history of 50 conversations of 40 turns: 3-5 MiB when full. The process's
# bound is the REMEMBERED_MESSAGES setting (copilot_runtime/conf.py), applied at start-up.
DEFAULT_SIZE = 4096


class HistoryCache:
    """Known histories by thread and by their first messages' ids, least recently used out
    first once they hold more than ``size`` messages together."""

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self.size = size
        self.messages = 0  # held by the histories kept, together
        self._kept: OrderedDict[int, KnownHistory] = OrderedDict()  # by id(), oldest first
        self._index: dict[tuple[Any, ...], KnownHistory] = {}

    def __len__(self) -> int:
        return len(self._kept)

    def resize(self, size: int) -> None:
        """A new bound (0 or less: nothing is remembered), the oldest histories out at once."""
        self.size = max(0, size)
        self._trim()

    def clear(self) -> None:
        for history in self._kept.values():
            history._keys.clear()
        self._kept.clear()
        self._index.clear()
        self.messages = 0

    # --- finding -------------------------------------------------------------------------------

    def of_thread(self, thread: ThreadKey) -> KnownHistory | None:
        """The history the thread's last request (or run, on a worker) carried."""
        return self._index.get(("thread", thread))

    def starting_with(
        self, route: str, message_id: str, *, second: bool = False
    ) -> KnownHistory | None:
        """The last history of ``route`` whose first (or ``second``) message has this id."""
        return self._index.get(("second" if second else "first", route, message_id))

    def enter(
        self,
        route: str,
        raws: list[Any],
        *,
        thread: ThreadKey | None = None,
        read: BodyRead | None = None,
        continues: tuple[KnownHistory, int] | None = None,
        keep: bool = True,
    ) -> KnownHistory:
        """The history of a request entering with messages ``raws`` on ``thread`` (None: a
        thread not known yet), kept in place of the one it continues. ``read``: what reading
        the request's bytes recognised (copilot_runtime/history/body.py), for these very
        ``raws``. ``continues``: ``(history, n)``, the first ``n`` of ``raws`` being that
        history's own first messages (a worker's rebuilt request). ``keep=False``: a request
        that stores nothing on the thread (a suggestion, a re-attachment), which uses what is
        known without taking its place."""
        mine = self._index.get(("thread", thread)) if thread is not None else None
        if read is not None and read.raws is raws:
            history = KnownHistory(
                route,
                raws,
                thread=thread,
                text=read.text,
                text_lead=read.text_lead,
                text_count=read.text_count,
                text_ids=read.text_ids,
            )
            source, lead, end = read.source, read.lead, read.known
        elif continues is not None:
            history = KnownHistory(route, raws, thread=thread)
            (source, end), lead = continues, 0
        else:
            history = KnownHistory(route, raws, thread=thread)
            source, lead, end = self._recognised(route, raws, mine)
        if source is not None:
            history.inherit(source, lead, end)
        # The thread's facts go on with it (another thread's that shares its messages don't).
        if mine is not None:
            history.facts = mine._thread_facts()
        elif source is not None and source.thread == thread:
            history.facts = source._thread_facts()
        if keep:
            self.put(history)
            if source is not None and source is not history and source.thread == thread:
                # The thread's history before this request: continued, not to be found again
                # (under a first message of its own, say, which this request replaced).
                self.discard(source)
        return history

    def _recognised(
        self, route: str, raws: list[Any], mine: KnownHistory | None
    ) -> tuple[KnownHistory | None, int, int]:
        """The known history ``raws`` continue, with the first message (lead 0) or behind a
        first message of their own (lead 1), and where what they share ends."""
        if not raws:
            return None, 0, 0
        mine = mine if mine is not None and mine.route == route else None
        first = _message_id(raws[0])
        by_first = self._index.get(("first", route, first)) if first is not None else None
        second = _message_id(raws[1]) if len(raws) > 1 else None
        by_second = self._index.get(("second", route, second)) if second is not None else None
        for source, lead in ((mine, 0), (by_first, 0), (mine, 1), (by_second, 1)):
            if source is None or (lead and len(raws) < 2):
                continue
            end = source.common_prefix(raws, lead)
            if end > lead:
                return source, lead, end
        return None, 0, 0

    # --- keeping ---------------------------------------------------------------------------------

    def put(self, history: KnownHistory) -> None:
        """Keep ``history`` under its thread and its first messages' ids, in place of the
        histories those keys named (a history longer than the whole bound is not kept)."""
        raws = history.raws
        if not raws or len(raws) > self.size:
            return
        kept = self._kept
        if id(history) in kept:
            kept.move_to_end(id(history))
            return
        index = self._index
        keys = history._keys = _keys(history)
        for key in keys:
            old = index.get(key)
            index[key] = history
            if old is not None and old is not history:
                old._keys.remove(key)
                if not old._keys and kept.pop(id(old), None) is not None:
                    self.messages -= len(old.raws)
        kept[id(history)] = history
        self.messages += len(raws)
        if self.messages > self.size:
            self._trim()

    def discard(self, history: KnownHistory) -> None:
        """``history`` is no longer found under any key."""
        if self._kept.pop(id(history), None) is not None:
            self.messages -= len(history)
        for key in history._keys:
            if self._index.get(key) is history:
                del self._index[key]
        history._keys.clear()

    def _trim(self) -> None:
        while self._kept and self.messages > self.size:
            self.discard(next(iter(self._kept.values())))


def _message_id(raw: Any) -> str | None:
    message_id = raw.get("id") if type(raw) is dict else None
    return message_id if type(message_id) is str and message_id else None


def _keys(history: KnownHistory) -> list[tuple[Any, ...]]:
    route, raws = history.route, history.raws
    keys: list[tuple[Any, ...]] = []
    if history.thread is not None:
        keys.append(("thread", history.thread))
    first = _message_id(raws[0])
    if first is not None:
        keys.append(("first", route, first))
    second = _message_id(raws[1]) if len(raws) > 1 else None
    if second is not None:
        keys.append(("second", route, second))
    text_first, text_second = history.text_ids
    if text_first is not None and text_first != first:
        keys.append(("first", route, text_first))
    if text_second is not None and text_second != second:
        keys.append(("second", route, text_second))
    return keys


# The process's known histories.
HISTORIES = HistoryCache()
