"""A re-sent history recognised in the request's bytes, before they are parsed.

Both CopilotKit clients send the whole conversation with every turn, serialised the same way
each time (``JSON.stringify``: compact, keys in order), so the history a thread's 120th turn
carries is, byte for byte, the 119th turn's messages followed by the new ones. Parsing those
bytes again (orjson) and recognising the parsed messages (``Recent.history_prefix``, a deep
comparison) were the larger part of what made a long thread's turn cost more than a short
one's: about 0.4 ms of server CPU at 240 messages.

``ResentHistories`` keeps, per route, the bytes of each recent history as orjson writes it
(identical to the clients') and the messages parsed from them. A body whose messages array
starts with those exact bytes is parsed with a placeholder in their place, and the kept
messages (the very objects parsed before, which ``Recent`` then recognises by identity) are put
back. Anything else (other bytes, another shape, a placeholder found elsewhere) is parsed whole,
as before: what a request means never depends on what is kept, only how fast it is read.

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
# How many "messages" keys a body is searched at (the history's is the first in both
# protocols' bodies; one nested in a state or a property may come before it).
_TRIES = 4


@dataclass(slots=True)
class _Kept:
    text: bytes  # "[" and the messages, without the closing "]"
    messages: list[Any]


class ResentHistories:
    """Per route, the recent histories' bytes and the messages parsed from them."""

    def __init__(self, store: RecentStore = MESSAGES) -> None:
        self._store = store  # its size bounds what is kept here too
        self._kept: OrderedDict[tuple[str, bytes], _Kept] = OrderedDict()
        self._count = 0  # messages kept
        self._token = secrets.token_hex(16)
        self._placeholder = b'["' + self._token.encode() + b'"'

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
            first = _first_id(body, start)
            kept = self._kept.get((route, first)) if first is not None else None
            if kept is None or not body.startswith(kept.text, start):
                continue
            end = start + len(kept.text)
            if body[end : end + 1] not in (b",", b"]"):
                continue
            try:
                value = orjson.loads(body[:start] + self._placeholder + body[end:])
            except orjson.JSONDecodeError:
                return None
            # Written back whole with the placeholder: the kept messages were, at this same
            # place of a body of this route.
            if not isinstance(value, dict) or not json_writable(value):
                return None
            holder = _holder(route, value)
            carried = holder.get("messages") if holder is not None else None
            if not isinstance(carried, list) or not carried or carried[0] != self._token:
                return None  # the bytes were another "messages" than the history's
            new = carried[1:]
            messages = kept.messages + new
            holder["messages"] = messages  # type: ignore[index]
            self._extend(route, body, kept, end, new, messages)
            return value
        return None

    def _remember_whole(self, route: str, body: bytes, value: Any) -> None:
        holder = _holder(route, value)
        messages = holder.get("messages") if holder is not None else None
        if not isinstance(messages, list) or not messages or len(messages) > self._store.size:
            return
        try:
            text = orjson.dumps(messages)[:-1]
        except TypeError:
            return
        if body.find(_KEY + text) < 0:
            return  # serialised otherwise than orjson does: never recognised by its bytes
        self._keep(route, _Kept(text, messages))

    def _extend(
        self, route: str, body: bytes, kept: _Kept, end: int, new: list[Any], messages: list[Any]
    ) -> None:
        if not new:
            self._keep(route, _Kept(kept.text, messages))
            return
        try:
            added = b"," + orjson.dumps(new)[1:-1]
        except TypeError:
            return
        if body.startswith(added, end) and len(messages) <= self._store.size:
            self._keep(route, _Kept(kept.text + added, messages))

    def _keep(self, route: str, kept: _Kept) -> None:
        first = _first_id(kept.text, 0)
        if first is None:
            return  # never found again: not kept
        key = (route, first)
        old = self._kept.pop(key, None)
        if old is not None:
            self._count -= len(old.messages)
        self._kept[key] = kept
        self._count += len(kept.messages)
        while self._kept and self._count > self._store.size:
            _key, oldest = self._kept.popitem(last=False)
            self._count -= len(oldest.messages)


def _first_id(data: bytes, start: int) -> bytes | None:
    """The first message's id in the array at ``start`` (the bytes of its JSON string)."""
    at = data.find(_ID, start, start + _ID_WITHIN)
    if at < 0:
        return None
    at += len(_ID)
    end = data.find(b'"', at, at + _ID_LENGTH)
    return data[at:end] if end > at else None


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
