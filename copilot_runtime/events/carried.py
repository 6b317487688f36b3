"""A worker's memory of the histories its run tasks carried, as the text they came in.

A run task carries its request as JSON text (``turn_request_to_json``), the thread's whole
history first: ``{"messages":[...],...}``. The worker used to read all of it, then recognise
the history's messages it had made on the thread's previous turn by comparing them, dict by
dict, with the ones it kept (``Recent.history_prefix``): both grew with the thread, about a
tenth of the worker's run loop in the celery shape at 40-turn threads (py-spy).

Here the worker keeps, per thread, the history's text as the last task brought it, and what it
made of each message. A task whose text begins with that text (one comparison of characters)
holds those very messages: they are JSON written alike, so they read alike, and what was made
of them is taken as it is; only the text after them is read. Anything else (an edit, a
regenerated reply, another writer's layout) reads the whole text as before.

Bounded with ``Recent`` by the REMEMBERED_MESSAGES setting, in messages.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import orjson

from copilot_runtime.events.recent import MESSAGES, RecentStore

# How ``turn_request_to_json`` begins a request: its messages first.
HEAD = '{"messages":['


Made = TypeVar("Made")
MakeMessages = Callable[[list[Any]], list[Made]]


class CarriedHistories(Generic[Made]):
    """Per thread: the text of the history a task carried last (its messages' JSON, comma
    separated) and the messages made of it, least recently used out first."""

    def __init__(self, store: RecentStore = MESSAGES) -> None:
        self.store = store
        self._kept: OrderedDict[str, tuple[str, list[Made]]] = OrderedDict()
        self._count = 0

    def read(
        self, key: str | None, text: str, *, history: MakeMessages[Made], more: MakeMessages[Made]
    ) -> tuple[dict[str, Any], list[Made]]:
        """Request ``text`` read: its payload (what its ``messages`` hold is for the caller to
        replace) and its messages, made by ``history`` from the raw messages of a history read
        whole, or by ``more`` from those after the history kept for ``key`` (a thread)."""
        split = None if key is None else self._split(key, text)
        if key is None or split is None:
            payload = orjson.loads(text)
            made = history(payload["messages"])
            if key is not None and text.startswith(HEAD):
                self._remember(key, _written(payload["messages"], text), made)
            return payload, made
        body, before, rest = split
        payload = orjson.loads(rest)
        after = payload["messages"]
        made = before + more(after)
        if after:
            written = _written(after, rest)
            body = f"{body},{written}" if written else ""
        self._remember(key, body, made)
        return payload, made

    def _split(self, key: str, text: str) -> tuple[str, list[Made], str] | None:
        """The history kept for ``key``, what was made of it and ``text`` without it, when
        ``text``'s messages begin with that history; None otherwise."""
        seen = self._kept.get(key)
        if seen is None or not text.startswith(HEAD):
            return None
        body, made = seen
        end = len(HEAD) + len(body)
        if len(text) <= end or not text.startswith(body, len(HEAD)):
            return None
        # The kept text is whole messages, so what follows it ends one: another message, or
        # the end of the list.
        follows = text[end]
        if follows == ",":
            return body, made, HEAD + text[end + 1 :]
        if follows == "]":
            return body, made, HEAD + text[end:]
        return None

    def _remember(self, key: str, body: str, made: list[Made]) -> None:
        old = self._kept.pop(key, None)
        if old is not None:
            self._count -= len(old[1])
        if not body or len(made) > self.store.size:
            return
        self._kept[key] = (body, made)
        self._count += len(made)
        while self._kept and self._count > self.store.size:
            _key, (_body, dropped) = self._kept.popitem(last=False)
            self._count -= len(dropped)

    def __len__(self) -> int:
        return len(self._kept)


def _written(raws: list[Any], text: str) -> str:
    """The text of ``raws`` (comma separated), which ``text`` holds right after ``HEAD``, if
    orjson writes them as ``text`` does (the runtime's own writer); "" if not."""
    try:
        written = orjson.dumps(raws).decode()[1:-1]
    except TypeError:  # a number orjson read but does not write
        return ""
    return written if written and text.startswith(written, len(HEAD)) else ""
