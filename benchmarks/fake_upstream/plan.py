"""Turn a chat request plus an optional directive into a deterministic reply plan.

Everything here is pure (no I/O), so what the fake answers depends only on the request body,
the directive and the request's sequence number (used for unique tool-call ids).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.fake_upstream.directives import (
    Directive,
    ErrorSpec,
    parse_inline_directive,
    select_step,
    strip_inline_directives,
)

_WORD_WITH_LEADING_SPACE = re.compile(r"\s*\S+")


@dataclass(frozen=True, slots=True)
class ToolCallPlan:
    id: str
    name: str
    argument_fragments: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReplyPlan:
    content_tokens: tuple[str, ...]
    tool_calls: tuple[ToolCallPlan, ...]
    usage: dict[str, Any]
    token_delay_s: float
    error: ErrorSpec | None = None
    fail_after_tokens: int | None = None
    hang: bool = False
    hang_before_headers: bool = False
    reasoning_tokens: tuple[str, ...] = ()
    reasoning_field: str = "reasoning_content"
    redacted_thinking: str | None = None  # the Messages API only

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"

    @property
    def content(self) -> str | None:
        return "".join(self.content_tokens) if self.content_tokens else None

    @property
    def token_count(self) -> int:
        return _token_count(self.content_tokens, self.tool_calls)


def find_directive(messages: Sequence[Mapping[str, Any]]) -> Directive | None:
    """The inline `FAKE:` directive of the last user message, if it has one."""
    user = _last_message_with_role(messages, "user")
    if user is None:
        return None
    return parse_inline_directive(content_text(user.get("content")))


def build_plan(
    *,
    body: Mapping[str, Any],
    directive: Directive | None,
    request_number: int,
    default_token_delay_ms: float,
) -> ReplyPlan:
    messages = chat_messages(body)
    active = (
        select_step(directive, assistant_turns=assistant_turns_since_last_user(messages))
        if directive is not None
        else Directive()
    )
    content_tokens = _content_tokens(active, messages)
    tool_calls = tuple(
        ToolCallPlan(
            id=spec.id or f"call_fake_{request_number}_{index}",
            name=spec.name,
            argument_fragments=split_fragments(spec.arguments, count=spec.fragments),
        )
        for index, spec in enumerate(active.tool_calls)
    )
    delay_ms = active.delay_ms if active.delay_ms is not None else default_token_delay_ms
    return ReplyPlan(
        content_tokens=content_tokens,
        tool_calls=tool_calls,
        usage=_usage(
            prompt_tokens=count_prompt_words(messages),
            completion_tokens=_token_count(content_tokens, tool_calls),
            override=active.usage,
        ),
        token_delay_s=delay_ms / 1000.0,
        error=active.error,
        fail_after_tokens=active.fail_after_tokens,
        hang=active.hang,
        hang_before_headers=active.hang_before_headers,
        reasoning_tokens=split_words(active.reasoning) if active.reasoning else (),
        reasoning_field=active.reasoning_field,
        redacted_thinking=active.redacted_thinking,
    )


def chat_messages(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    return [message for message in messages if isinstance(message, Mapping)]


def content_text(content: object) -> str:
    """Text of a message content: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts)
    return ""


def assistant_turns_since_last_user(messages: Sequence[Mapping[str, Any]]) -> int:
    turns = 0
    for message in reversed(messages):
        role = message.get("role")
        if role == "user":
            break
        if role == "assistant":
            turns += 1
    return turns


def split_words(text: str) -> tuple[str, ...]:
    """Split text into word tokens that carry their leading whitespace ("a b" -> "a", " b")."""
    tokens = _WORD_WITH_LEADING_SPACE.findall(text)
    consumed = sum(len(token) for token in tokens)
    if consumed < len(text):  # trailing whitespace (or whitespace only) must not get lost
        if tokens:
            tokens[-1] += text[consumed:]
        else:
            tokens.append(text[consumed:])
    return tuple(tokens)


def numbered_tokens(count: int) -> tuple[str, ...]:
    return tuple(f"t{index}" if index == 0 else f" t{index}" for index in range(count))


def split_fragments(arguments: str, *, count: int) -> tuple[str, ...]:
    if not arguments:
        return ()
    size = -(-len(arguments) // max(1, count))  # ceiling division
    return tuple(arguments[start : start + size] for start in range(0, len(arguments), size))


# Each ASCII byte as b" " (whitespace, as ``str.split`` sees it) or b"w" (part of a word).
_WORD_MARKS = bytes(0x20 if chr(code).isspace() else 0x77 for code in range(256))


def count_prompt_words(messages: Sequence[Mapping[str, Any]]) -> int:
    """The words of every message's content, as ``str.split`` counts them. Counted on bytes
    for ASCII text (a word starts where a space is followed by a word byte): splitting made a
    string per word before the first token, which every turn of a long thread waited on, in
    both runtimes' columns."""
    text = " ".join([content_text(message.get("content")) for message in messages])
    if not text.isascii():
        return len(text.split())
    marks = text.encode().translate(_WORD_MARKS)
    return marks.count(b" w") + marks.startswith(b"w")


def default_reply(messages: Sequence[Mapping[str, Any]]) -> str:
    if messages and messages[-1].get("role") == "tool":
        return f"Tool result: {content_text(messages[-1].get('content'))}"
    user = _last_message_with_role(messages, "user")
    said = strip_inline_directives(content_text(user.get("content"))) if user else ""
    return f"You said: {said}"


def _token_count(content_tokens: Sequence[str], tool_calls: Sequence[ToolCallPlan]) -> int:
    """Token-bearing chunks: one per content token, tool-call header and argument piece."""
    return len(content_tokens) + sum(1 + len(call.argument_fragments) for call in tool_calls)


def _content_tokens(active: Directive, messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    if active.text is not None:
        return split_words(active.text)
    if active.tokens is not None:
        return numbered_tokens(active.tokens)
    if active.fail_after_tokens is not None:
        # Enough content for the cut to happen mid-stream rather than after the reply.
        return numbered_tokens(active.fail_after_tokens + 1)
    if active.tool_calls:
        return ()
    return split_words(default_reply(messages))


def _usage(
    *, prompt_tokens: int, completion_tokens: int, override: Mapping[str, Any] | None
) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    if override:
        usage.update(override)
        if "total_tokens" not in override:
            usage["total_tokens"] = _as_int(usage["prompt_tokens"]) + _as_int(
                usage["completion_tokens"]
            )
    return usage


def _as_int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _last_message_with_role(
    messages: Sequence[Mapping[str, Any]], role: str
) -> Mapping[str, Any] | None:
    for message in reversed(messages):
        if message.get("role") == role:
            return message
    return None
