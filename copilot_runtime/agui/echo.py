"""Which messages of a run input RUN_STARTED echoes: those new to the thread."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from copilot_runtime.history import KnownHistory

# The echo's form of a known history (copilot_runtime/history): ``_Echoes``.
_ECHOES = "agui.echoes"


def _stored_ids(message: dict[str, Any]) -> list[str]:
    """The ids of the rows a message of the history is stored as (none for roles the thread
    does not keep)."""
    role = message["role"]
    if role in ("user", "tool"):
        return [message["id"]]
    if role == "assistant":
        ids = [message["id"]] if message.get("content") else []
        ids.extend(call["id"] for call in message.get("toolCalls") or [])
        return ids
    return []


@dataclass(frozen=True, slots=True)
class _Echoes:
    """Which messages of a history RUN_STARTED echoes, decided for the next turn that re-sends
    them: by position, those echoed whatever is new (``always``), and, by each id they are
    stored under, those echoed when one of their ids is new (no id under two messages)."""

    always: tuple[int, ...]
    by_id: dict[str, int]


def echoed_input(
    raw: dict[str, Any], new_message_ids: Iterable[str], history: KnownHistory | None = None
) -> dict[str, Any]:
    """The run input RUN_STARTED echoes: only the messages new to the thread, as the TypeScript
    runtime sends it (the client already has the rest), and with a new tool result the
    assistant message without text that made its call. Messages the thread does not store
    (system, developer, activity, reasoning) cannot be told apart and are echoed.

    A history re-sent with the next turn is the same message objects (``history``): its
    earlier messages are decided by looking up the new ids, not by a pass over them."""
    new = set(new_message_ids)
    messages = raw.get("messages") or []
    done, kept = history.resume(_ECHOES, messages) if history is not None else (0, None)
    always = list(kept.always) if kept is not None else []
    by_id = dict(kept.by_id) if kept is not None else {}
    echoed = [index for message_id in new if (index := by_id.get(message_id)) is not None]
    unique = True
    for index in range(done, len(messages)):
        message = messages[index]
        role = message["role"]
        if role == "user" or (role == "assistant" and not message.get("toolCalls")):
            # Most of a history is user and assistant texts: decided without an id list.
            if role == "assistant" and not message.get("content"):
                always.append(index)
                echoed.append(index)
                continue
            ids = [message["id"]]
        else:
            ids = _stored_ids(message)
            if not ids:
                always.append(index)
                echoed.append(index)
                continue
        if any(message_id in new for message_id in ids):
            echoed.append(index)
        for message_id in ids:
            unique = unique and message_id not in by_id
            by_id[message_id] = index
    if unique and history is not None:
        history.keep(_ECHOES, messages, _Echoes(always=tuple(always), by_id=by_id))
    if kept is not None:
        echoed.extend(kept.always)
    chosen = set(echoed)  # a message with two new ids is found twice
    for index in [i for i in chosen if messages[i]["role"] == "tool"]:
        # A new tool result brings the assistant message that made its call, when that one has
        # no text: TypeScript knows a message by the ids its events carried, and a call-only
        # message's id was only ever a TOOL_CALL_START's parentMessageId. So it echoes that
        # message in the follow-up run of a frontend tool call, with the result.
        holder = by_id.get(messages[index].get("toolCallId") or "")
        if holder is None:
            continue
        made_by = messages[holder]
        if made_by["role"] == "assistant" and not made_by.get("content"):
            chosen.add(holder)
    if len(chosen) == len(messages):
        return raw
    return {**raw, "messages": [messages[index] for index in sorted(chosen)]}
