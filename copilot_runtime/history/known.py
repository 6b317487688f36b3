"""One thread's history as this process knows it (``KnownHistory``).

A CopilotKit client re-sends the whole conversation with every turn, so a thread's 120th
request carries 239 messages the process has already read, checked and converted. A
``KnownHistory`` is the history one request carried: its messages as parsed from the client's
JSON (``raws``), the bytes they were read from, what each layer made of them (its *forms*),
and what the thread's storage holds of them (``stored``: the ids stored and current, at the
thread's history version) and which run last carried them to a worker (``queued``).

The request's ``KnownHistory`` is made where the request enters (``HistoryCache.enter``) from
the one the same thread's previous request left, and handed down with the request: each layer
resumes its pass where the previous request's stopped and keeps its result on it for the next.

A form is kept with the very message objects it was made of and found again only for those
objects (an identity test per message, in C): a message re-sent unchanged comes back as the
same object (read from its bytes, or recognised by equality when the history enters), and
anything else (an edit, a regenerated reply, another thread) is made anew. Nothing here
decides what a request means, only how much of it is made again.

What a form holds is shared by every later request that resumes from it: its users never
change it (they copy what they change).
"""

from __future__ import annotations

import operator
from collections.abc import Hashable
from itertools import islice
from typing import Any, NamedTuple

# The key a thread's facts are kept under: the web's (owner's primary key or None for anonymous
# callers, client thread id), a client thread id naming a thread only together with its owner;
# a worker's stored thread's primary key.
ThreadKey = Hashable


class StoredIds(NamedTuple):
    """What the storage knows the thread holds: ``ids`` stored and current while the thread's
    history version is still ``version`` (migration 0009's trigger draws a new one whenever a
    statement changes or deletes its messages)."""

    thread: ThreadKey
    thread_pk: int
    version: int
    ids: frozenset[str]


class QueuedRun(NamedTuple):
    """The last run this process queued on the thread, which a later run's task may refer to
    instead of carrying its messages (copilot_runtime/runs/task_history.py)."""

    thread: ThreadKey
    thread_pk: int
    run_id: str
    forms: list[bytes]  # its messages' JSON forms, in order
    first_at: dict[str, int]  # where each message id first comes in them


class BodyRead(NamedTuple):
    """A request body read, and what its bytes told of its history (for ``HistoryCache.enter``,
    with these very ``raws``)."""

    value: dict[str, Any]  # the body, parsed
    raws: list[Any] | None  # its history's messages (None: it carries none)
    source: KnownHistory | None  # the known history whose bytes it re-sends
    lead: int  # 1: raws[0] is the body's own, the known messages follow it
    known: int  # raws[lead:known] are the known history's own message objects
    text: bytes  # the bytes of raws[:text_count] as sent (b"": not as orjson writes them)
    text_lead: int  # where the second message's "," starts in ``text`` (0: one message)
    text_count: int
    text_ids: tuple[str | None, str | None]  # the first two messages' ids as ``text`` has them


class ThreadFacts:
    """What this process learnt of a thread's storage, shared by the thread's successive
    histories: what one request learns, the next one knows, whichever entered first."""

    __slots__ = ("queued", "stored")

    def __init__(self) -> None:
        self.stored: StoredIds | None = None
        self.queued: QueuedRun | None = None


class KnownHistory:
    """The history one request carried, and what this process made and knows of it."""

    __slots__ = (
        "_forms",
        "_keys",
        "_plain_end",
        "_plain_stopped",
        "facts",
        "raws",
        "route",
        "run_id",
        "text",
        "text_count",
        "text_ids",
        "text_lead",
        "thread",
    )

    def __init__(
        self,
        route: str,
        raws: list[Any],
        *,
        thread: ThreadKey | None = None,
        text: bytes = b"",
        text_lead: int = 0,
        text_count: int = 0,
        text_ids: tuple[str | None, str | None] = (None, None),
    ) -> None:
        self.route = route
        # The messages as parsed from the request (never changed once parsed).
        self.raws = raws
        self.thread = thread
        # The bytes of raws[:text_count] as the client wrote them: "[" and the messages, comma
        # separated, without the closing "]"; and where the second message's "," starts in
        # them (0: a single message). b"": not known (written otherwise than orjson writes).
        self.text = text
        self.text_lead = text_lead
        self.text_count = text_count
        # The first and second messages' ids as read from ``text`` (where a body's bytes are
        # looked up by), when they differ from the parsed ones.
        self.text_ids = text_ids
        self.facts: ThreadFacts | None = None  # see ``stored`` and ``queued``
        # On a worker: the run whose request this history is (a later task's base).
        self.run_id: str | None = None
        # Form name -> how it was kept (see ``_EACH`` below) and what it holds.
        self._forms: dict[str, tuple[str, Any, Any, Any]] = {}
        # raws[:_plain_end] hold nothing but strings, nulls, objects and arrays of them, and
        # whether raws[_plain_end] is known not to (see ``plain_end``).
        self._plain_end = 0
        self._plain_stopped = False
        # The cache's keys for this history (copilot_runtime/history/cache.py).
        self._keys: list[tuple[Any, ...]] = []

    def __len__(self) -> int:
        return len(self.raws)

    @property
    def stored(self) -> StoredIds | None:
        """What the storage said the thread holds (checked against the turn's own thread)."""
        return self.facts.stored if self.facts is not None else None

    @stored.setter
    def stored(self, stored: StoredIds | None) -> None:
        self._thread_facts().stored = stored

    @property
    def queued(self) -> QueuedRun | None:
        """The last run this process queued on the thread (checked likewise)."""
        return self.facts.queued if self.facts is not None else None

    @queued.setter
    def queued(self, queued: QueuedRun | None) -> None:
        self._thread_facts().queued = queued

    def _thread_facts(self) -> ThreadFacts:
        if self.facts is None:
            self.facts = ThreadFacts()
        return self.facts

    def __repr__(self) -> str:
        return f"<KnownHistory {self.route} {len(self.raws)} messages, thread {self.thread!r}>"

    # --- passes over the whole history, resumed ------------------------------------------------

    def resume(self, form: str, messages: list[Any]) -> tuple[int, Any]:
        """How many first messages of ``messages`` a pass kept as ``form`` went over (the very
        same objects), and what it left after them; (0, None): start from scratch."""
        kept = self._forms.get(form)
        if kept is None:
            return 0, None
        kind, made_of, state, _unused = kept
        if kind is _OVER_RAWS:  # made of this history's messages: known the same when it entered
            return (made_of, state) if messages is self.raws else (0, None)
        if kind is not _OVER_OTHERS:
            return 0, None
        if len(made_of) > len(messages) or not all(map(operator.is_, made_of, messages)):
            return 0, None
        return len(made_of), state

    def keep(self, form: str, messages: list[Any], state: Any) -> None:
        """``state`` is what a pass left after all of ``messages`` (this history's own
        ``raws``, or a list made of them)."""
        if messages is self.raws:
            self._forms[form] = (_OVER_RAWS, len(messages), state, None)
        else:
            self._forms[form] = (_OVER_OTHERS, list(messages), state, None)

    # --- what was made of each message -----------------------------------------------------------

    def reuse(self, form: str, raws: list[Any]) -> tuple[int, int, list[Any]]:
        """``(start, stop, made)``: what ``form`` made of ``raws[start:stop]`` (this history's own
        ``raws``) when an earlier request carried those very messages (read-only: the list
        kept, when it is all of it). ``start`` is 1 when the first message is the request's own
        (v1's instructions, under a fresh id each time)."""
        kept = self._forms.get(form)
        if kept is None or kept[0] is not _EACH or raws is not self.raws:
            return 0, 0, []
        _kind, made, start, stop = kept
        if start == 0 and stop == len(made):
            return 0, stop, made
        return start, stop, made[start:stop]

    def keep_each(
        self, form: str, raws: list[Any], made: list[Any], start: int = 0, stop: int = 0
    ) -> None:
        """``made[i]`` was made of ``raws[i]``, this history's own messages (``raws[start:stop]``:
        as ``reuse`` gave them). Kept up to the first message without an id: the store gives
        such a message an id of its own when it writes it, so what was made of it is made
        anew every time."""
        if raws is not self.raws or (start and not _has_id(raws[0])):
            return
        count = stop
        while count < len(raws) and _has_id(raws[count]):
            count += 1
        if count > 0:
            self._forms[form] = (_EACH, made[:count], 0, count)

    # --- recognising the next request's history --------------------------------------------------

    def plain_end(self) -> int:
        """How many first messages hold nothing but strings, nulls, and objects and arrays of
        them: an equal message is then the same message (``True == 1`` and ``1 == 1.0`` make
        equal messages of different ones otherwise). Worked out once per message."""
        end = self._plain_end
        if not self._plain_stopped:
            raws = self.raws
            while end < len(raws) and _plain(raws[end]):
                end += 1
            self._plain_end = end
            self._plain_stopped = end < len(raws)
        return end

    def common_prefix(self, raws: list[Any], lead: int) -> int:
        """Where this history and ``raws`` part: ``raws[lead:end]`` are this history's
        ``raws[lead:end]``, equal where equality is sound (``plain_end``), the very same objects
        past that."""
        kept = self.raws
        count = min(len(kept), len(raws))
        if lead >= count:
            return lead
        sound = max(lead, min(count, self.plain_end()))
        end = lead
        if sound > lead:
            if kept[lead:sound] == raws[lead:sound]:  # one comparison, in C
                end = sound
            else:
                while kept[end] == raws[end]:
                    end += 1
                return end
        return _same_until(kept, raws, end, count)

    def inherit(self, source: KnownHistory, lead: int, end: int) -> None:
        """Take what ``source`` made of the messages this history shares with it
        (``raws[lead:end]``, equal to or the same as its own)."""
        forms = self._forms
        for name, kept in source._forms.items():
            kind = kept[0]
            if kind is _EACH:
                start, stop = max(kept[2], lead), min(kept[3], end)
                if stop > start:
                    forms[name] = (_EACH, kept[1], start, stop)
            elif kind is _OVER_RAWS:
                if lead == 0 and kept[1] <= end:
                    forms[name] = kept
            else:
                forms[name] = kept  # checked message by message when resumed
        plain = min(source._plain_end, end)
        stopped = source._plain_stopped and source._plain_end < end
        if lead and plain:  # raws[0] is this request's own: told here, one message
            if not _plain(self.raws[0]):
                plain, stopped = 0, True
        elif lead:
            stopped = False
        self._plain_end, self._plain_stopped = plain, stopped


# How a form was kept: per message of the history (what was made, and from which to which
# message it holds); after the history's messages (how many, what was left); after the
# messages of another list (that list, what was left).
_EACH = "each"
_OVER_RAWS = "over raws"
_OVER_OTHERS = "over others"


def _same_until(kept: list[Any], messages: list[Any], start: int, stop: int) -> int:
    """The first index from ``start`` (up to ``stop``) where the two lists hold different
    objects. All of them the same is one pass in C."""
    if all(map(operator.is_, islice(kept, start, stop), islice(messages, start, stop))):
        return stop
    at = start
    while kept[at] is messages[at]:
        at += 1
    return at


def _has_id(raw: Any) -> bool:
    message_id = raw.get("id") if type(raw) is dict else None
    return type(message_id) is str and message_id != ""


def _plain(value: Any) -> bool:
    kind = type(value)
    if kind is str or value is None:
        return True
    if kind is dict:
        return all(map(_plain, value.values()))
    if kind is list:
        return all(map(_plain, value))
    return False
