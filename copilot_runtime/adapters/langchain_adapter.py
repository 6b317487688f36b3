"""Any LangChain chat model as the runtime's model: Gemini, Bedrock, Groq, Mistral, Ollama and
the rest through their LangChain packages.

The setting names a factory (a dotted path to a callable returning a ``BaseChatModel``) and
the options it is called with: ``{"kind": "langchain", "factory": "myapp.models.gemini",
"options": {...}}``. The model streams ``AIMessageChunk`` objects; their text, tool-call
chunks, usage and finish reason become the runtime's model chunks, so the engine, the stored
usage and the traces work as with the other adapters. This path costs what LangChain's objects
cost per chunk: it is for breadth, the OpenAI-compatible and Anthropic adapters are the fast
paths. ``langchain-core`` (and the model's package) are needed only where it is configured.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from django.utils.module_loading import import_string

from copilot_runtime.adapters.base import (
    FinishChunk,
    ModelChunk,
    ModelRequest,
    ReasoningChunk,
    ReasoningSealChunk,
    TextChunk,
    ToolCallChunk,
    UpstreamError,
    UsageChunk,
)
from copilot_runtime.adapters.errors import AdapterSettingError
from copilot_runtime.adapters.openai_adapter import with_text_documents_inlined, without_thinking
from copilot_runtime.events.reasoning import THINKING_BLOCKS

# The LangChain model types (``_llm_type``) that take Anthropic's thinking blocks back.
_THINKING_MODEL_TYPES = frozenset({"anthropic-chat"})

# What providers call the end of a reply, in OpenAI's words (what the engine speaks).
_FINISH_REASONS = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "STOP": "stop",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "length": "length",
    "max_tokens": "length",
    "MAX_TOKENS": "length",
}


def _chat_model(factory: str, options: dict[str, Any]) -> Any:
    try:
        build = import_string(factory)
    except ImportError as exc:
        raise AdapterSettingError(
            f"The langchain adapter's factory {factory!r} does not import: {exc}"
        ) from exc
    model = build(**options)
    if not hasattr(model, "astream") or not hasattr(model, "bind_tools"):
        raise AdapterSettingError(
            f"The langchain adapter's factory {factory!r} returned {type(model).__name__}, "
            "not a LangChain chat model."
        )
    return model


def _model_name(model: Any) -> str:
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "text_delta")
        )
    return ""


def _reasoning_of(chunk: Any) -> str:
    """A chunk's reasoning, from langchain-core's standard content blocks (``reasoning``),
    which it makes from each provider's form: Anthropic's ``thinking`` parts, DeepSeek's and
    others' ``additional_kwargs["reasoning_content"]``, OpenAI's reasoning summaries. A
    ``thinking`` part of a model that names no provider stays a non-standard block: read too."""
    content = chunk.content
    if isinstance(content, str) and not getattr(chunk, "additional_kwargs", None):
        return ""  # plain text, most chunks: no blocks built for it
    try:
        blocks = chunk.content_blocks
    except (AttributeError, TypeError, ValueError):  # an older or foreign message class
        return ""
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "reasoning":
            parts.append(str(block.get("reasoning") or ""))
        elif kind == "non_standard":
            value = block.get("value")
            if isinstance(value, dict) and value.get("type") == "thinking":
                parts.append(str(value.get("thinking") or ""))
    return "".join(parts)


def _seals_of(content: list[Any]) -> list[ReasoningSealChunk]:
    """The ends of Anthropic thinking blocks in a chunk's content (langchain-anthropic streams
    a block's signature as a part of its own), and redacted blocks."""
    seals: list[ReasoningSealChunk] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "thinking" and part.get("signature"):
            seals.append(ReasoningSealChunk(signature=str(part["signature"])))
        elif kind == "redacted_thinking" and part.get("data"):
            seals.append(ReasoningSealChunk(redacted=str(part["data"])))
    return seals


def with_thinking_as_content(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each assistant message's thinking blocks put first in its content
    (then its text), as langchain-anthropic reads an AI message's thinking back."""
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks = message.get(THINKING_BLOCKS) if isinstance(message, dict) else None
        if not blocks:
            out.append(message)
            continue
        content: list[Any] = list(blocks)
        text = message.get("content")
        if isinstance(text, list):
            content.extend(text)
        elif text:
            content.append({"type": "text", "text": text})
        kept = {key: value for key, value in message.items() if key != THINKING_BLOCKS}
        out.append({**kept, "content": content})
    return out


def _upstream_error(exc: Exception) -> UpstreamError:
    """A provider's failure as the runtime's codes, by the HTTP status its SDK reports."""
    status = getattr(exc, "status_code", None) or getattr(
        getattr(exc, "response", None), "status_code", None
    )
    message = f"The model service failed: {type(exc).__name__}: {exc}"[:500]
    if not isinstance(status, int):
        return UpstreamError(message, code="UPSTREAM_ERROR")
    if status == 429:
        code = "UPSTREAM_RATE_LIMITED"
    elif status < 500:
        code = "UPSTREAM_CLIENT_ERROR"
    else:
        code = "UPSTREAM_SERVER_ERROR"
    return UpstreamError(message, code=code, status_code=status)


def _tool_choice(choice: str | dict[str, Any] | None) -> Any:
    if isinstance(choice, dict):
        return (choice.get("function") or {}).get("name") or "any"
    if choice == "required":
        return "any"
    return choice


class LangChainAdapter:
    name = "langchain"

    def __init__(self, *, factory: str, options: dict[str, Any], model: str = "") -> None:
        from langchain_core.messages import convert_to_messages

        self._convert = convert_to_messages
        self._model = _chat_model(factory, options)
        self.default_model = model or _model_name(self._model)
        # The AI SDK's naming: the model's own kind ("openai-chat", "anthropic-chat"...).
        self.provider = f"langchain.{getattr(self._model, '_llm_type', 'chat')}"
        self._keeps_thinking = getattr(self._model, "_llm_type", "") in _THINKING_MODEL_TYPES

    def _runnable(self, request: ModelRequest) -> Any:
        if not request.tools:
            return self._model
        choice = _tool_choice(request.tool_choice)
        kwargs: dict[str, Any] = {}
        if choice is not None:
            kwargs["tool_choice"] = choice
        if request.parallel_tool_calls is False:
            kwargs["parallel_tool_calls"] = False
        return self._model.bind_tools(request.tools, **kwargs)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        # Anthropic's thinking blocks are the Anthropic adapter's own (a thread that changed
        # models may carry some): LangChain would refuse the unknown field.
        # Anthropic's signed thinking goes back to an Anthropic model, as content blocks of the
        # AI message (langchain-anthropic's form); any other model would refuse them. Text
        # documents are inlined as for chat completions: LangChain's integrations take PDFs at
        # most.
        history = (
            with_thinking_as_content(request.messages)
            if self._keeps_thinking
            else without_thinking(request.messages)
        )
        messages = self._convert(with_text_documents_inlined(history))
        runnable = self._runnable(request)
        finish: str | None = None
        usage: UsageChunk | None = None
        saw_tool_call = False
        try:
            async for chunk in runnable.astream(messages, stop=request.stop or None):
                reasoning = _reasoning_of(chunk)
                if reasoning:
                    yield ReasoningChunk(reasoning)
                if type(chunk.content) is list:
                    for seal in _seals_of(chunk.content):
                        yield seal
                text = _text_of(chunk.content)
                if text:
                    yield TextChunk(text)
                for call in getattr(chunk, "tool_call_chunks", None) or ():
                    saw_tool_call = True
                    yield ToolCallChunk(
                        index=call.get("index") or 0,
                        id=call.get("id"),
                        name=call.get("name"),
                        arguments_delta=call.get("args") or "",
                    )
                metadata = getattr(chunk, "response_metadata", None) or {}
                reason = metadata.get("finish_reason") or metadata.get("stop_reason")
                if reason:
                    finish = _FINISH_REASONS.get(str(reason), str(reason).lower())
                counts = getattr(chunk, "usage_metadata", None)
                if counts:
                    usage = _usage(counts, usage)
        except UpstreamError:
            raise
        except Exception as exc:  # whatever the provider's SDK raises
            raise _upstream_error(exc) from exc
        yield FinishChunk(finish or ("tool_calls" if saw_tool_call else "stop"))
        if usage is not None:
            yield usage


def _usage(counts: dict[str, Any], earlier: UsageChunk | None) -> UsageChunk:
    """Usage chunks add up (some providers report input and output in separate chunks)."""
    total = earlier or UsageChunk()
    total.input_tokens += int(counts.get("input_tokens") or 0)
    total.output_tokens += int(counts.get("output_tokens") or 0)
    details = counts.get("input_token_details") or {}
    total.cached_input_tokens += int(details.get("cache_read") or 0)
    total.cache_write_input_tokens += int(details.get("cache_creation") or 0)
    total.reasoning_tokens += int((counts.get("output_token_details") or {}).get("reasoning") or 0)
    return total
