"""What an adapter streams back, and the errors it raises."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
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
class ReasoningChunk:
    """A piece of the model's reasoning, streamed before the answer it leads to."""

    delta: str


@dataclass(slots=True)
class ReasoningSealChunk:
    """The end of a reasoning block, with what replays it to the provider: Anthropic's
    ``signature`` of a thinking block, or a ``redacted_thinking`` block's ``redacted`` data
    (a block of its own, with no text)."""

    signature: str = ""
    redacted: str = ""


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
    # Written to the prompt cache; like cached reads, part of ``input_tokens``.
    cache_write_input_tokens: int = 0


ModelChunk = (
    TextChunk | ReasoningChunk | ReasoningSealChunk | ToolCallChunk | FinishChunk | UsageChunk
)


def joined(chunks: list[ModelChunk]) -> list[ModelChunk]:
    """``chunks`` with each run of adjacent text deltas, and of one tool call's argument
    deltas, joined into one chunk.

    An adapter passes what one read of the service's stream delivered. Those deltas are all
    here at once, so joining them sends the same text at the same moment, while every step
    after (events, guardrails, the log, the wire, the client) works once per read instead of
    once per token. A stream that delivers one token per read is passed through unchanged.
    A call's id and name are taken from its first chunk, as the chat engine reads them.
    """
    if len(chunks) < 2:
        return chunks
    out: list[ModelChunk] = []
    parts: list[str] = []
    for chunk in chunks:
        last = out[-1] if out else None
        if type(chunk) in (TextChunk, ReasoningChunk) and type(last) is type(chunk):
            parts.append(chunk.delta)
            continue
        if (
            type(chunk) is ToolCallChunk
            and type(last) is ToolCallChunk
            and last.index == chunk.index
        ):
            parts.append(chunk.arguments_delta)
            continue
        _close(out, parts)
        out.append(chunk)
    _close(out, parts)
    return out


async def chunks_per_read(
    reads: AsyncIterator[list[bytes]],
    parse: Callable[[bytes], list[ModelChunk]],
    *,
    end: bytes | None = None,
    parse_read: Callable[[list[bytes]], tuple[list[ModelChunk], Exception | None]] | None = None,
) -> AsyncIterator[ModelChunk]:
    """The model chunks of a stream's ``data:`` payloads, grouped by the read that delivered
    them (``SseTransport.event_batches``): each read's deltas joined (``joined``).

    Until the first delta (text, or a tool call's arguments), payloads are parsed and handed
    on one at a time: the first token goes out before the rest of its read is parsed (joined
    from the start, it waited for the whole read). A payload equal to
    ``end`` ends the stream. A payload that cannot be parsed raises once the chunks before it
    are handed on. ``parse_read``, if given, parses the rest of a read at once: its chunks
    joined, and what parsing raised (as ``parse`` and ``joined`` would give them).
    """
    leading = True
    try:
        async for payloads in reads:
            last = end is not None and end in payloads
            if last:
                payloads = payloads[: payloads.index(end)]
            if leading:
                for position, data in enumerate(payloads):
                    lead = parse(data)
                    for chunk in lead:
                        yield chunk
                    if any(_is_delta(chunk) for chunk in lead):
                        leading = False
                        payloads = payloads[position + 1 :]
                        break
                else:
                    payloads = []
            chunks: list[ModelChunk] = []
            failure: Exception | None = None
            if parse_read is not None:
                if payloads:
                    chunks, failure = parse_read(payloads)
            else:
                try:
                    for data in payloads:
                        chunks += parse(data)
                except Exception as error:
                    failure = error  # raised once what the read delivered before it has gone out
                chunks = joined(chunks)
            for chunk in chunks:
                yield chunk
            if failure is not None:
                raise failure
            if last:
                return
    finally:
        # Closed here: a stream ends at its end marker with its reads unfinished, and an
        # unfinished async generator is otherwise closed by the event loop, in a task of its
        # own, once it is collected (its connection released then, not now).
        close = getattr(reads, "aclose", None)
        if close is not None:
            await close()


def _is_delta(chunk: ModelChunk) -> bool:
    return type(chunk) in (TextChunk, ReasoningChunk) or (
        type(chunk) is ToolCallChunk and bool(chunk.arguments_delta)
    )


def _close(out: list[ModelChunk], parts: list[str]) -> None:
    """Fold the deltas gathered in ``parts`` into the last chunk of ``out`` (a copy)."""
    if not parts:
        return
    last = out[-1]
    if type(last) is TextChunk:
        out[-1] = TextChunk(last.delta + "".join(parts))
    elif type(last) is ReasoningChunk:
        out[-1] = ReasoningChunk(last.delta + "".join(parts))
    elif type(last) is ToolCallChunk:
        out[-1] = ToolCallChunk(
            index=last.index,
            id=last.id,
            name=last.name,
            arguments_delta=last.arguments_delta + "".join(parts),
        )
    parts.clear()


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
