"""No model: a runtime that only serves agents and frontend actions.

Turns that need the runtime's model (plain chat, the built-in LLM agent, suggestions) are
refused before they start with a ``CONFIGURATION_ERROR`` (``agents.turns``); this adapter is
the last line: anything that still asks it to stream gets the same error, never a crash.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from copilot_runtime.adapters.base import ModelChunk, ModelRequest, UpstreamError

NO_MODEL_CODE = "CONFIGURATION_ERROR"
NO_MODEL_MESSAGE = (
    "No model is configured for this runtime (its adapter is 'none'): it serves agents and "
    "frontend actions only. Set COPILOT_RUNTIME['ADAPTER'] to answer plain chat."
)


class NoModelAdapter:
    name = "none"
    provider = ""
    default_model = ""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        raise UpstreamError(NO_MODEL_MESSAGE, code=NO_MODEL_CODE)
        yield  # pragma: no cover - makes this an async generator
