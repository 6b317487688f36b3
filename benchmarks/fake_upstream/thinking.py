"""Extended thinking on the fake's Messages API: a request that enables it (``thinking``:
``{"type": "enabled", ...}``) gets the directive's ``reasoning`` as a ``thinking`` block first
(``thinking_delta`` word by word, then a ``signature_delta``), and its ``redacted_thinking``
as a block of that type; and, as Anthropic does, a request whose assistant turns carry a
thinking block with a signature that is not the one given for its text is refused (400).

The signature is a digest of the text, so a test can tell the block came back unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from benchmarks.fake_upstream.plan import ReplyPlan


def signature_of(thinking: str) -> str:
    return "fake-sig-" + hashlib.sha256(thinking.encode()).hexdigest()[:24]


def thinking_enabled(body: Mapping[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") == "enabled"


def thinking_blocks(plan: ReplyPlan) -> list[dict[str, Any]]:
    """The reply's thinking blocks, whole (what a non-streamed reply holds)."""
    blocks: list[dict[str, Any]] = []
    if plan.reasoning_tokens:
        text = "".join(plan.reasoning_tokens)
        blocks.append({"type": "thinking", "thinking": text, "signature": signature_of(text)})
    if plan.redacted_thinking:
        blocks.append({"type": "redacted_thinking", "data": plan.redacted_thinking})
    return blocks


def streamed_blocks(plan: ReplyPlan, index: int) -> list[tuple[str, dict[str, Any]]]:
    """(event type, payload) of the thinking blocks from content block ``index`` on."""
    events: list[tuple[str, dict[str, Any]]] = []
    for block in thinking_blocks(plan):
        start = {**block, "thinking": "", "signature": ""} if block["type"] == "thinking" else block
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        if block["type"] == "thinking":
            deltas = [{"type": "thinking_delta", "thinking": t} for t in plan.reasoning_tokens]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
            events.extend(
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                for d in deltas
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    return events


def invalid_thinking(body: Mapping[str, Any]) -> str | None:
    """Why Anthropic would refuse the request's thinking blocks, if it would."""
    for message in body.get("messages") or ():
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, Mapping) or block.get("type") != "thinking":
                continue
            text = block.get("thinking")
            if not isinstance(text, str) or block.get("signature") != signature_of(text):
                return "Invalid `signature` in `thinking` block"
    return None
