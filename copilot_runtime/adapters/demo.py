"""The offline demo model: the default when no API key is configured.

It is clearly labelled in every answer, so nobody mistakes it for a real model. It needs no
network, so ``make run`` works anywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from copilot_runtime.adapters.base import (
    FinishChunk,
    ModelChunk,
    ModelRequest,
    TextChunk,
    UsageChunk,
)

DEMO_MODEL_NAME = "offline-demo"
_TOKEN_DELAY_SECONDS = 0.02


def _last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(
                    part.get("text", "") for part in content if part.get("type") == "text"
                )
    return ""


def demo_reply(request: ModelRequest) -> str:
    last = request.messages[-1] if request.messages else {}
    if last.get("role") == "tool":
        return f"[offline demo model] The action returned: {last.get('content', '')}"
    said = _last_user_text(request).strip() or "nothing yet"
    return (
        "[offline demo model] No OPENAI_API_KEY is configured, so this answer comes from the "
        f"built-in demo model. You said: {said}"
    )


class DemoAdapter:
    name = "demo"
    provider = "demo"
    default_model = DEMO_MODEL_NAME

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        words = demo_reply(request).split(" ")
        for index, word in enumerate(words):
            yield TextChunk(word if index == 0 else " " + word)
            await asyncio.sleep(_TOKEN_DELAY_SECONDS)
        yield FinishChunk("stop")
        yield UsageChunk(
            input_tokens=sum(len(str(m.get("content", "")).split()) for m in request.messages),
            output_tokens=len(words),
        )
