"""Where a Messages API reply stops: the request's ``stop_sequences`` and ``max_tokens``.

Anthropic's ``max_tokens`` is required and caps the reply; a stop sequence ends it before the
sequence (which is not sent). Chat completions ignore both on the fake, so this applies to the
Messages API only. The reply plan is cut here, before it is written, so the streamed and the
whole answers, and the output token count, agree with the stop reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from benchmarks.fake_upstream.plan import ReplyPlan, ToolCallPlan

# The plan's finish reason in Anthropic's words, when nothing cut the reply.
_NATURAL_STOPS = {"stop": "end_turn", "tool_calls": "tool_use"}


@dataclasses.dataclass(frozen=True, slots=True)
class Stop:
    reason: str
    sequence: str | None = None


def _cut_text(tokens: tuple[str, ...], length: int) -> tuple[str, ...]:
    """The tokens holding the first ``length`` characters of their text."""
    kept: list[str] = []
    used = 0
    for token in tokens:
        if used >= length:
            break
        kept.append(token[: length - used])
        used += len(kept[-1])
    return tuple(token for token in kept if token)


def _at_stop_sequence(plan: ReplyPlan, sequences: list[str]) -> tuple[ReplyPlan, Stop] | None:
    text = "".join(plan.content_tokens)
    found = [(text.find(s), s) for s in sequences if s and s in text]
    if not found:
        return None
    position, sequence = min(found)
    # The model stops at the sequence: no tool call comes after it.
    cut = dataclasses.replace(
        plan, content_tokens=_cut_text(plan.content_tokens, position), tool_calls=()
    )
    return cut, Stop("stop_sequence", sequence)


def _at_max_tokens(plan: ReplyPlan, budget: int) -> ReplyPlan:
    """The plan with only its first ``budget`` token-bearing pieces (a tool call's header is
    one, each of its argument fragments one; a call cut short keeps broken JSON, as Anthropic
    would leave it)."""
    content = plan.content_tokens[:budget]
    budget -= len(content)
    calls: list[ToolCallPlan] = []
    for call in plan.tool_calls:
        if budget <= 0:
            break
        fragments = call.argument_fragments[: budget - 1]
        calls.append(dataclasses.replace(call, argument_fragments=fragments))
        budget -= 1 + len(fragments)
    return dataclasses.replace(plan, content_tokens=content, tool_calls=tuple(calls))


def apply_stops(plan: ReplyPlan, body: Mapping[str, Any]) -> tuple[ReplyPlan, Stop]:
    """The plan as the request's limits leave it, and why it stops."""
    stop = Stop(_NATURAL_STOPS[plan.finish_reason])
    sequences = body.get("stop_sequences")
    if isinstance(sequences, list):
        stopped = _at_stop_sequence(plan, [s for s in sequences if isinstance(s, str)])
        if stopped is not None:
            plan, stop = stopped
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and 0 <= max_tokens < plan.token_count:
        return _at_max_tokens(plan, max_tokens), Stop("max_tokens")
    return plan, stop
