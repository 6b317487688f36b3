"""What an adapter streams back, and the errors it raises."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(slots=True)
class ModelRequest:
    """One model call: OpenAI-shaped messages and tools, plus request parameters."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    temperature: float | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None


@dataclass(slots=True)
class TextChunk:
    delta: str


@dataclass(slots=True)
class ToolCallChunk:
    index: int
    id: str | None
    name: str | None
    arguments_delta: str


@dataclass(slots=True)
class FinishChunk:
    reason: str | None


@dataclass(slots=True)
class UsageChunk:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0


ModelChunk = TextChunk | ToolCallChunk | FinishChunk | UsageChunk


class UpstreamError(Exception):
    """The model service failed; carries a stable code and never the raw traceback."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status_code = status_code
        self.retry_after = retry_after

    def details(self) -> dict[str, Any]:
        details: dict[str, Any] = {"code": self.code}
        if self.status_code is not None:
            details["statusCode"] = self.status_code
        if self.retry_after is not None:
            details["retryAfter"] = self.retry_after
        return details


class ModelAdapter(Protocol):
    name: str
    # Who serves the calls, as the AI SDK names providers ("openai.chat"): the v2 client reads
    # it from each usage entry of RUN_FINISHED.
    provider: str
    default_model: str

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """Stream one model call. Cancelling the iteration closes the upstream request."""
        ...
