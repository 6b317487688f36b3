"""A known history recognised in a request's bytes, before they are parsed (``read_body``).

Both CopilotKit clients send the whole conversation with every turn, serialised the same way
each time (``JSON.stringify``: compact, keys in order), so the history a thread's 120th turn
carries is, byte for byte, the 119th turn's messages followed by the new ones. Parsing those
bytes again and recognising the parsed messages (a deep comparison) were the larger part of
what made a long thread's turn cost more than a short one's.

A ``KnownHistory`` keeps the bytes its messages were read from (``text``). A body whose
messages array starts with the bytes of the last history that began with the same message (found
by the first message's id) is parsed with a placeholder in their place, and that history's
messages (the very objects parsed before) are put back: what was made of them is then found by
an identity test. The v1 client sends its instructions first, as a system message under a fresh
id in every request: a history is also found by its second message's id, its bytes from there
on replaced the same way. Anything else (other bytes, another shape, a placeholder found
elsewhere) is parsed whole, as before: what a request means never depends on what is known,
only how fast it is read.

Sound because the bytes replaced are exactly orjson's serialisation of the known messages,
which parses back to equal values; the placeholder is a random token of the process, which no
client can send.
"""

from __future__ import annotations

import secrets
from typing import Any

import orjson

from copilot_runtime.history.cache import HISTORIES, HistoryCache
from copilot_runtime.history.known import BodyRead, KnownHistory

# The routes whose bodies carry a history: v1's GraphQL, v2's AG-UI run input. The names the
# cache keeps their histories under (copilot_runtime/history/cache.py).
V1 = "graphql"
V2 = "agui"

# The start of a messages array, where both protocols carry the history (v1: in
# variables.data, v2: at the top).
_KEY = b'"messages":'
# A known history is found by its first message's id (the clients' ids are UUIDs; the v1
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

_TOKEN = secrets.token_hex(16)
_PLACEHOLDER = b'"' + _TOKEN.encode() + b'"'


def read_body(route: str, body: bytes, cache: HistoryCache = HISTORIES) -> BodyRead | None:
    """The body as a JSON object orjson can write back whole, reading a known history's bytes
    at most once; None for anything else (not JSON, not an object, nested too deeply)."""
    if len(cache):
        read = _resent(cache, route, body)
        if read is not None:
            return read
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not _writable(value):
        return None
    return _read_whole(cache, route, body, value)


def _read_whole(cache: HistoryCache, route: str, body: bytes, value: dict[str, Any]) -> BodyRead:
    holder = _holder(route, value)
    messages = holder.get("messages") if holder is not None else None
    if not isinstance(messages, list):
        return BodyRead(value, None, None, 0, 0, b"", 0, 0, (None, None))
    text, lead = b"", 0
    if messages and len(messages) <= cache.size:
        try:
            text = orjson.dumps(messages)[:-1]
            lead = 1 + len(orjson.dumps(messages[0])) if len(messages) > 1 else 0
        except TypeError:
            text = b""
        if text and body.find(_KEY + text) < 0:
            text = b""  # serialised otherwise than orjson does: never recognised by its bytes
    if not text:
        return BodyRead(value, messages, None, 0, 0, b"", 0, 0, (None, None))
    return BodyRead(value, messages, None, 0, 0, text, lead, len(messages), _ids(text, lead))


def _resent(cache: HistoryCache, route: str, body: bytes) -> BodyRead | None:
    at = -1
    for _ in range(_TRIES):
        at = body.find(_KEY, at + 1)
        if at < 0:
            return None
        start = at + len(_KEY)
        found = _find(cache, route, body, start)
        if found is None:
            continue
        known, begin, end, skipped = found
        if body[end : end + 1] not in (b",", b"]"):
            continue
        # The known messages' bytes, as one placeholder element of the same array.
        opening = b"[" if skipped == 0 else b","
        try:
            value = orjson.loads(body[:begin] + opening + _PLACEHOLDER + body[end:])
        except orjson.JSONDecodeError:
            return None
        # Written back whole with the placeholder: the known messages were, at this same
        # place of a body of this route.
        if not isinstance(value, dict) or not _writable(value):
            return None
        holder = _holder(route, value)
        if holder is None:
            return None
        carried = holder.get("messages")
        if not isinstance(carried, list) or len(carried) <= skipped or carried[skipped] != _TOKEN:
            return None  # the bytes were another "messages" than the history's
        lead, new = carried[:skipped], carried[skipped + 1 :]
        count = known.text_count
        raws = known.raws
        messages = lead + (raws if count == len(raws) and not skipped else raws[skipped:count])
        messages += new
        holder["messages"] = messages
        text, text_lead, text_count = _extended(body, known, start, begin, end, new)
        ids = _ids(text, text_lead) if text else (None, None)
        return BodyRead(value, messages, known, skipped, count, text, text_lead, text_count, ids)
    return None


def _find(
    cache: HistoryCache, route: str, body: bytes, start: int
) -> tuple[KnownHistory, int, int, int] | None:
    """The known history at ``start``: (it, where its bytes begin and end in ``body``, how
    many messages of the body come before them). Its bytes from the array's opening, or from
    its second message on behind a first message of the body's own."""
    first_at = body.find(_ID, start, start + _ID_WITHIN)
    if first_at < 0:
        return None
    known = cache.starting_with(route, _id_value(body, first_at))
    if known is not None and known.text and body.startswith(known.text, start):
        return known, start, start + len(known.text), 0
    second_at = body.find(_ID, first_at + len(_ID), first_at + _LEAD_WITHIN)
    if second_at < 0:
        return None
    known = cache.starting_with(route, _id_value(body, second_at), second=True)
    if known is None or not known.text or not known.text_lead:
        return None
    tail = known.text[known.text_lead :]  # ",{...the second message..."
    begin = second_at - tail.find(_ID)
    if begin <= start or not body.startswith(tail, begin):
        return None
    return known, begin, begin + len(tail), 1


def _extended(
    body: bytes, known: KnownHistory, start: int, begin: int, end: int, new: list[Any]
) -> tuple[bytes, int, int]:
    """The bytes of the body's messages, as far as they are orjson's: the known ones, and the
    new ones after them when orjson writes them as the body has them."""
    added = b""
    if new:
        try:
            added = b"," + orjson.dumps(new)[1:-1]
        except TypeError:
            added = b""
        if not added or not body.startswith(added, end):
            added = b""
    count = known.text_count + (len(new) if added else 0)
    if begin == start:
        text_lead = known.text_lead or (len(known.text) if added else 0)
        return known.text + added, text_lead, count
    # Behind a first message of this body's own: its bytes with the known ones after it.
    return body[start:end] + added, begin - start, count


def _id_value(data: bytes, at: int) -> str:
    """The JSON string after the ``"id":"`` at ``at`` (bounded), as its bytes say it."""
    at += len(_ID)
    end = data.find(b'"', at, at + _ID_LENGTH)
    return data[at:end].decode("utf-8", "replace") if end > at else ""


def _ids(text: bytes, lead: int) -> tuple[str | None, str | None]:
    first_at = text.find(_ID, 0, _ID_WITHIN)
    second_at = text.find(_ID, lead, lead + _ID_WITHIN) if lead else -1
    return (
        _id_value(text, first_at) or None if first_at >= 0 else None,
        _id_value(text, second_at) or None if second_at >= 0 else None,
    )


def _holder(route: str, value: Any) -> dict[str, Any] | None:
    """The object whose "messages" is the history: v1's ``variables.data``, v2's body."""
    if not isinstance(value, dict):
        return None
    if route == V1:
        variables = value.get("variables")
        data = variables.get("data") if isinstance(variables, dict) else None
        return data if isinstance(data, dict) else None
    return value


def _writable(value: Any) -> bool:
    """Whether orjson writes ``value`` back (it reads 1,024 levels of nesting, writes 254)."""
    try:
        orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: nested too deeply
        return False
    return True
