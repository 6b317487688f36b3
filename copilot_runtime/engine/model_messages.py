"""The model request of a turn: the thread's messages, the context and the offered tools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from copilot_runtime.engine.actions import ServerAction
from copilot_runtime.events.reasoning import THINKING_BLOCKS, thinking_block
from copilot_runtime.events.request import FrontendAction, InputMessage
from copilot_runtime.history import KnownHistory


def _context_message(context: list[tuple[str, str]]) -> dict[str, Any] | None:
    if not context:
        return None
    lines = ["The application shares this context with you:"]
    lines.extend(f"- {description}: {value}" for description, value in context)
    return {"role": "system", "content": "\n".join(lines)}


# Instructions at a history's head (v1 sends its instructions first, under a fresh id with
# every request): converted apart, so that the rest of the history is the one kept before.
_INSTRUCTION_ROLES = ("system", "developer")
# The conversion's form of a known history (copilot_runtime/history): what it left after the
# history's messages past the leading instructions.
_FOLDED = "model_messages"


@dataclass(frozen=True, slots=True)
class _Folded:
    """What converting a history's messages left after them, for the next turn that re-sends
    the same messages. Shared by every turn that resumes from it, so never changed: an entry a
    later message completes (an assistant message's next tool call, a call's later result) is
    copied first. Indices are positions in ``entries``."""

    entries: tuple[dict[str, Any], ...]
    calls_by_parent: dict[str, int]
    known_calls: frozenset[str]
    answered: dict[str, int]


class _Fold:
    """Converting messages in order, from a kept ``_Folded`` or from nothing."""

    __slots__ = (
        "answered",
        "calls_by_parent",
        "copied",
        "entries",
        "known_calls",
        "shared",
        "thinking",
    )

    def __init__(self, kept: _Folded | None) -> None:
        self.entries: list[dict[str, Any]] = list(kept.entries) if kept else []
        # Entries below this index are the kept fold's own, changed only as copies.
        self.shared = len(self.entries)
        self.copied: set[int] = set()
        self.calls_by_parent: dict[str, int] = dict(kept.calls_by_parent) if kept else {}
        self.known_calls: set[str] = set(kept.known_calls) if kept else set()
        self.answered: dict[str, int] = dict(kept.answered) if kept else {}
        # Signed thinking blocks waiting for the assistant message they came before.
        self.thinking: list[dict[str, Any]] = []

    def folded(self) -> _Folded:
        return _Folded(
            entries=tuple(self.entries),
            calls_by_parent=self.calls_by_parent,
            known_calls=frozenset(self.known_calls),
            answered=self.answered,
        )

    def _to_change(self, index: int) -> dict[str, Any]:
        """The entry at ``index``, to change: a kept one is copied (once) first."""
        entry = self.entries[index]
        if index < self.shared and index not in self.copied:
            entry = dict(entry)
            if "tool_calls" in entry:
                entry["tool_calls"] = list(entry["tool_calls"])
            self.entries[index] = entry
            self.copied.add(index)
        return entry

    def _assistant(self, entry: dict[str, Any]) -> dict[str, Any]:
        """A new assistant entry, carrying the thinking blocks that came before it."""
        if self.thinking:
            entry[THINKING_BLOCKS] = self.thinking
            self.thinking = []
        return entry

    def add(self, message: InputMessage) -> None:
        entries = self.entries
        if message.kind == "text":
            entry = {"role": message.role or "user", "content": message.content}
            if message.role == "assistant":
                entry = self._assistant(entry)
            else:
                self.thinking = []  # a user's message: the blocks answered nothing
            entries.append(entry)
            if message.role == "assistant":
                self.calls_by_parent[message.id] = len(entries) - 1
        elif message.kind == "reasoning":
            block = thinking_block(content=message.content, encrypted_value=message.result)
            if block is not None:
                self.thinking.append(block)
        elif message.kind == "action_execution":
            call = {
                "id": message.id,
                "type": "function",
                "function": {
                    "name": message.action_name,
                    "arguments": orjson.dumps(message.arguments or {}).decode(),
                },
            }
            self.known_calls.add(message.id)
            parent = (
                self.calls_by_parent.get(message.parent_message_id)
                if message.parent_message_id
                else None
            )
            if (
                parent is None
                and entries
                and entries[-1].get("role") == "assistant"
                and "tool_calls" in entries[-1]
            ):
                parent = len(entries) - 1
            if parent is None:
                entries.append(self._assistant({"role": "assistant", "content": None}))
                parent = len(entries) - 1
                if message.parent_message_id:
                    self.calls_by_parent[message.parent_message_id] = parent
            self._to_change(parent).setdefault("tool_calls", []).append(call)
        elif message.kind == "result":
            call_id = message.action_execution_id
            if call_id not in self.known_calls:
                return
            if call_id in self.answered:
                # A later result for the same call wins: after an approval, the action's own
                # result follows the client's decision.
                self._to_change(self.answered[call_id])["content"] = message.result
                return
            entries.append({"role": "tool", "tool_call_id": call_id, "content": message.result})
            self.answered[call_id] = len(entries) - 1
        elif message.kind in ("image", "document"):
            entries.append({"role": message.role or "user", "content": [media_content(message)]})
        # Agent state messages are the frontend's view of an agent; the model never sees them.


def media_content(message: InputMessage) -> dict[str, Any]:
    """An image or document row as an OpenAI chat content part. A stored payload holding
    ``://`` is an address (base64 never does). Documents are ``file`` parts whatever their
    type: each adapter sends them as its model takes them (a text file inlined as text for
    OpenAI-compatible models, a text document block for Anthropic)."""
    payload = message.image_bytes
    is_url = "://" in payload
    if message.kind == "image":
        url = payload if is_url else f"data:image/{message.image_format or 'jpeg'};base64,{payload}"
        return {"type": "image_url", "image_url": {"url": url}}
    data = payload if is_url else f"data:{message.image_format};base64,{payload}"
    return {"type": "file", "file": {"filename": message.content, "file_data": data}}


def model_messages(
    messages: list[InputMessage],
    context: list[tuple[str, str]],
    history: KnownHistory | None = None,
) -> list[dict[str, Any]]:
    """OpenAI chat messages for the thread: tool calls folded into their assistant message.

    Tool results without a matching tool call are dropped (the model API rejects them), and a
    repeated result for the same call is sent once, with the latest content.

    A history re-sent with the next turn comes back as the same message objects: with the
    request's ``history`` (``TurnRequest.history``) the conversion resumes after the messages
    the last turn converted. The entries returned may be shared with later turns: callers must
    not change them.
    """
    head: list[dict[str, Any]] = []
    context_message = _context_message(context)
    if context_message is not None:
        head.append(context_message)
    lead = 0
    while (
        lead < len(messages)
        and messages[lead].kind == "text"
        and messages[lead].role in _INSTRUCTION_ROLES
    ):
        head.append({"role": messages[lead].role, "content": messages[lead].content})
        lead += 1
    rest = messages[lead:] if lead else messages
    done, kept = history.resume(_FOLDED, rest) if history is not None else (0, None)
    fold = _Fold(kept)
    for message in rest[done:]:
        fold.add(message)
    folded = fold.folded()
    # A message without an id gets one when stored: a fold over it is never reused.
    if history is not None and all(message.id for message in rest[done:]):
        history.keep(_FOLDED, rest, folded)
    entries = folded.entries
    # Without tool calls there is nothing to drop (a text-only thread skips a second pass).
    if fold.known_calls:
        return [*head, *_without_unanswered_calls(list(entries))]
    return [*head, *entries]


def _without_unanswered_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop tool calls that never got a result: the model API refuses such a history."""
    answered = {m["tool_call_id"] for m in messages if m.get("role") == "tool"}
    cleaned: list[dict[str, Any]] = []
    for message in messages:
        calls = message.get("tool_calls")
        if calls is not None:
            kept = [call for call in calls if call["id"] in answered]
            message = {key: value for key, value in message.items() if key != "tool_calls"}
            if kept:
                message["tool_calls"] = kept
            elif not message.get("content"):
                continue
        cleaned.append(message)
    return cleaned


def offered_tools(
    frontend_actions: list[FrontendAction], server_actions: dict[str, ServerAction]
) -> list[dict[str, Any]]:
    """Tools for the model: server actions and enabled frontend actions (``remote`` ones are
    not offered; ``disabled`` ones were dropped when the request was parsed)."""
    tools = [action.tool_definition() for action in server_actions.values()]
    for action in frontend_actions:
        if action.available == "remote" or action.name in server_actions:
            continue
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": action.name,
                    "description": action.description,
                    "parameters": action.parameters or {"type": "object", "properties": {}},
                },
            }
        )
    return tools


def assistant_message(
    *, text: str, calls: list[tuple[str, str, str]], thinking: list[dict[str, Any]]
) -> dict[str, Any]:
    """The model's answer in one step as the next request sends it back: its text, its tool
    calls (``(id, name, arguments)``) and, for Anthropic, its signed thinking blocks."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            for call_id, name, arguments in calls
        ],
    }
    if thinking:
        message[THINKING_BLOCKS] = thinking
    return message
