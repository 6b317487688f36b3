"""What a model call was sent and answered, kept on its span without copying the history.

A thread's history is already stored (its ``Message`` rows), and each call of a run re-sends
it: copying it into every span would store a long thread's history once per call, the square
of its length. So a generation span's input holds references only (``call_input``):

- ``history``: the stored messages the request carried, as the ids of the first and last and
  their count (a request's history is the thread's messages in order);
- ``in_run``: how many entries this run added before the call (its earlier calls' answers and
  their tools' results, which are those spans' own outputs);
- ``system`` and ``tools``: the sha256 of the system prompt and of the tool definitions, each
  stored once per distinct value (``TraceBlob``), however many calls send it.

What is new in a call, its answer, is the span's output. The admin's inspector rebuilds the
whole prompt from these (``conversations/admin/call_content.py``). Every piece of content
passes the ``TRACE_CONTENT_REDACT`` hook before it is hashed or kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from django.utils.module_loading import import_string

from copilot_runtime.conf import runtime_setting

Redact = Callable[[Any], Any]

_INSTRUCTION_ROLES = ("system", "developer")
# Messages that are not part of what the model reads as the conversation (reasoning reaches
# Anthropic inside its assistant message, and is stored set aside: conversations.models).
_NOT_SENT_KINDS = ("agent_state", "reasoning")


def keep_as_is(value: Any) -> Any:
    return value


def redaction_hook() -> Redact:
    """The ``TRACE_CONTENT_REDACT`` callable (a dotted path), or one that keeps content as is."""
    path = runtime_setting("TRACE_CONTENT_REDACT")
    if not path:
        return keep_as_is
    hook: Redact = import_string(str(path))
    return hook


def content_hash(value: Any) -> str:
    """The sha256 of a JSON value, in a canonical form (sorted keys), as 64 hex digits."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def history_reference(messages: Sequence[Any]) -> dict[str, Any] | None:
    """The stored messages a request carried (``InputMessage``s), as a range: the ids of the
    first and last and their count. Leading instructions are the system prompt's part, not the
    range's; None when nothing else was sent."""
    lead = 0
    while (
        lead < len(messages)
        and messages[lead].kind == "text"
        and messages[lead].role in _INSTRUCTION_ROLES
    ):
        lead += 1
    sent = [m for m in messages[lead:] if m.kind not in _NOT_SENT_KINDS]
    if not sent:
        return None
    return {"first": sent[0].id, "last": sent[-1].id, "count": len(sent)}


def leading_system(entries: Sequence[dict[str, Any]]) -> int:
    """How many of a model request's first entries are its system prompt."""
    lead = 0
    while lead < len(entries) and entries[lead].get("role") in _INSTRUCTION_ROLES:
        lead += 1
    return lead


class ContentBook:
    """The distinct system prompts and tool definitions a run's calls were sent, by hash."""

    def __init__(self, redact: Redact = keep_as_is) -> None:
        self.redact = redact
        self.blobs: dict[str, Any] = {}
        # The tool definitions a run sends with each call are one list: hashed once. The
        # list is kept with its digest, so its id cannot be reused by another object.
        self._tools: tuple[Any, str] | None = None
        # The length of the first call's conversation past its system prompt: entries beyond
        # it were added by this run.
        self._base: int | None = None

    def intern(self, value: Any) -> str:
        kept = self.redact(value)
        digest = content_hash(kept)
        self.blobs.setdefault(digest, kept)
        return digest

    def call_input(self, *, request: Any, history: dict[str, Any] | None) -> dict[str, Any]:
        """A model call's span's input: references to what it was sent (see the module)."""
        entries = list(request.messages)
        lead = leading_system(entries)
        if self._base is None:
            self._base = len(entries) - lead
        reference: dict[str, Any] = {
            "history": history,
            "in_run": max(len(entries) - lead - self._base, 0),
            "system": self.intern(entries[:lead]) if lead else None,
            "tools": self._tools_digest(request.tools) if request.tools else None,
        }
        return reference

    def _tools_digest(self, tools: Any) -> str:
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, self.intern(list(tools)))
        return self._tools[1]
