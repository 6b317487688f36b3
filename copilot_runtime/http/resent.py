"""A re-sent history recognised in the request's bytes, before they are parsed.

Both CopilotKit clients send the whole conversation with every turn, serialised the same way
each time (``JSON.stringify``: compact, keys in order), so the history a thread's 120th turn
carries is, byte for byte, the 119th turn's messages followed by the new ones. Parsing those
bytes again (orjson) and recognising the parsed messages (``Recent.history_prefix``, a deep
comparison) were the larger part of what made a long thread's turn cost more than a short
one's: about 0.4 ms of server CPU at 240 messages.

``ResentHistories`` keeps, per route, the bytes of each recent history as orjson writes it
(identical to the clients') and the messages parsed from them, found by the first message's
id. A body whose messages array starts with those exact bytes is parsed with a placeholder in
their place, and the kept messages (the very objects parsed before, which ``Recent`` then
recognises by identity) are put back. The v1 client sends its instructions first, as a system
message under a fresh id in every request: a history is also found by its second message's
id, its bytes from there on replaced the same way. Anything else (other bytes, another shape,
a placeholder found elsewhere) is parsed whole, as before: what a request means never depends
on what is kept, only how fast it is read.

Sound because the bytes replaced are exactly orjson's serialisation of the kept messages, which
parses back to equal values; the placeholder is a random token of the process, which no
client can send. Bounded with ``Recent`` by the REMEMBERED_MESSAGES setting, in messages.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson

from copilot_runtime.events.recent import MESSAGES, RecentStore
from copilot_runtime.http.body import json_writable

# The start of a messages array, where both protocols carry the history (v1: in
# variables.data, v2: at the top).
_KEY = b'"messages":'
# A kept history is found by its first message's id (the clients' ids are UUIDs; the v1
# client writes the keys in order, so "createdAt" comes first), looked for this far into it.
_ID = b'"id":"'
_ID_WITHIN = 256
_ID_LENGTH = 256
# How far behind the first message's id the second's is looked for (past the first message,
# which may be long instructions).
_LEAD_WITHIN = 64 * 1024
# How many "messages" keys a body is searched at (the history's is the first in both
# protocols' bodies; one nested in a state or a property may come before it).
_TRIES = 4


@dataclass(slots=True)
class _Kept:
    text: bytes  # "[" and the messages, without the closing "]"
    messages: list[Any]
    first: bytes  # the first message's id
    # Where the second message's "," starts in ``text`` (0: a single message), and its id.
    lead: int
    second: bytes | None


class ResentHistories:
    """Per route, the recent histories' bytes and the messages parsed from them."""

    def __init__(self, store: RecentStore = MESSAGES) -> None:
        self._store = store  # its size bounds what is kept here too
        # By (route, first message id), least recently used first; and by the second
        # message's id, for a history re-sent behind a first message of its own each time
        # (v1's instructions: a system message under a fresh id in every request).
        self._kept: OrderedDict[tuple[str, bytes], _Kept] = OrderedDict()
        self._by_second: dict[tuple[str, bytes], _Kept] = {}
        self._count = 0  # messages kept
        self._token = secrets.token_hex(16)
        self._placeholder = b'"' + self._token.encode() + b'"'

    def __len__(self) -> int:
        return len(self._kept)

    def json_object(self, route: str, body: bytes) -> dict[str, Any] | None:
        """The body as a JSON object orjson can write back whole (``json_writable``), reading
        a kept history's bytes at most once; None for anything else (not JSON, not an object,
        nested too deeply)."""
        if self._kept:
            value = self._resent(route, body)
            if value is not None:
                return value
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(value, dict) or not json_writable(value):
            return None
        self._remember_whole(route, body, value)
        return value

    def _resent(self, route: str, body: bytes) -> dict[str, Any] | None:
        at = -1
        for _ in range(_TRIES):
            at = body.find(_KEY, at + 1)
            if at < 0:
                return None
            start = at + len(_KEY)
            found = self._find(route, body, start)
            if found is None:
                continue
            kept, begin, end, skipped = found
            if body[end : end + 1] not in (b",", b"]"):
                continue
            # The kept messages' bytes, as one placeholder element of the same array.
            opening = b"[" if skipped == 0 else b","
            try:
                value = orjson.loads(body[:begin] + opening + self._placeholder + body[end:])
            except orjson.JSONDecodeError:
                return None
            # Written back whole with the placeholder: the kept messages were, at this same
            # place of a body of this route.
            if not isinstance(value, dict) or not json_writable(value):
                return None
            holder = _holder(route, value)
            if holder is None:
                return None
            carried = holder.get("messages")
            if (
                not isinstance(carried, list)
                or len(carried) <= skipped
                or carried[skipped] != self._token
            ):
                return None  # the bytes were another "messages" than the history's
            lead, new = carried[:skipped], carried[skipped + 1 :]
            messages = lead + (kept.messages[1:] if skipped else kept.messages) + new
            holder["messages"] = messages
            self._extend(route, body, kept, start, begin, end, new, messages)
            return value
        return None

    def _find(self, route: str, body: bytes, start: int) -> tuple[_Kept, int, int, int] | None:
        """The kept history at ``start``: (it, where its bytes begin and end in ``body``, how
        many messages of the body come before them). Its bytes from the array's opening, or
        from its second message on behind a first message of the body's own."""
        first_at = body.find(_ID, start, start + _ID_WITHIN)
        if first_at < 0:
            return None
        kept = self._kept.get((route, _id_value(body, first_at)))
        if kept is not None and body.startswith(kept.text, start):
            return kept, start, start + len(kept.text), 0
        second_at = body.find(_ID, first_at + len(_ID), first_at + _LEAD_WITHIN)
        if second_at < 0:
            return None
        kept = self._by_second.get((route, _id_value(body, second_at)))
        if kept is None or kept.second is None:
            return None
        tail = kept.text[kept.lead :]  # ",{...the second message..."
        begin = second_at - tail.find(_ID)
        if begin <= start or not body.startswith(tail, begin):
            return None
        return kept, begin, begin + len(tail), 1

    def _remember_whole(self, route: str, body: bytes, value: Any) -> None:
        holder = _holder(route, value)
        messages = holder.get("messages") if holder is not None else None
        if not isinstance(messages, list) or not messages or len(messages) > self._store.size:
            return
        try:
            text = orjson.dumps(messages)[:-1]
            lead = 1 + len(orjson.dumps(messages[0])) if len(messages) > 1 else 0
        except TypeError:
            return
        if body.find(_KEY + text) < 0:
            return  # serialised otherwise than orjson does: never recognised by its bytes
        self._keep(route, text, messages, lead)

    def _extend(
        self,
        route: str,
        body: bytes,
        kept: _Kept,
        start: int,
        begin: int,
        end: int,
        new: list[Any],
        messages: list[Any],
    ) -> None:
        if len(messages) > self._store.size:
            return
        added = b""
        if new:
            try:
                added = b"," + orjson.dumps(new)[1:-1]
            except TypeError:
                return
            if not body.startswith(added, end):
                return
        if begin == start:
            self._keep(route, kept.text + added, messages, kept.lead)
        else:  # behind a first message of this body's own: kept with it, in place of the old
            old = (route, kept.first)
            if self._kept.get(old) is kept:
                self._forget(old, self._kept.pop(old))
            self._keep(route, body[start:end] + added, messages, begin - start)

    def _keep(self, route: str, text: bytes, messages: list[Any], lead: int) -> None:
        first_at = text.find(_ID, 0, _ID_WITHIN)
        first = _id_value(text, first_at) if first_at >= 0 else b""
        if not first:
            return  # never found again: not kept
        second = None
        if lead:
            second_at = text.find(_ID, lead, lead + _ID_WITHIN)
            second = _id_value(text, second_at) if second_at >= 0 else None
        kept = _Kept(text, messages, first, lead, second or None)
        key = (route, first)
        self._forget(key, self._kept.pop(key, None))
        self._kept[key] = kept
        if kept.second:
            self._by_second[(route, kept.second)] = kept
        self._count += len(messages)
        while self._kept and self._count > self._store.size:
            self._forget(*self._kept.popitem(last=False))

    def _forget(self, key: tuple[str, bytes], kept: _Kept | None) -> None:
        if kept is None:
            return
        self._count -= len(kept.messages)
        if kept.second and self._by_second.get((key[0], kept.second)) is kept:
            del self._by_second[(key[0], kept.second)]


def _id_value(data: bytes, at: int) -> bytes:
    """The bytes of the JSON string after the ``"id":"`` at ``at`` (bounded)."""
    at += len(_ID)
    end = data.find(b'"', at, at + _ID_LENGTH)
    return data[at:end] if end > at else b""


def _holder(route: str, value: Any) -> dict[str, Any] | None:
    """The object whose "messages" is the history: v1's ``variables.data``, v2's body."""
    if not isinstance(value, dict):
        return None
    if route == "graphql":
        variables = value.get("variables")
        data = variables.get("data") if isinstance(variables, dict) else None
        return data if isinstance(data, dict) else None
    return value


# The hot routes' histories, in this process.
RESENT = ResentHistories()
