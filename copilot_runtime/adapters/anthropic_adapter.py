"""Anthropic's Messages API, read raw like the OpenAI-compatible adapter.

The engine speaks OpenAI-shaped messages and tools; this adapter turns them into a Messages
request (instructions in ``system``, tool calls as ``tool_use`` blocks, tool results as
``tool_result`` blocks in one user message, roles alternating) and the stream back into the
engine's chunks: ``text_delta`` as text, ``thinking_delta`` as reasoning (its
``signature_delta``, or a ``redacted_thinking`` block, sealing it), a ``tool_use`` block
start and its ``input_json_delta`` fragments as a tool call, the stop reason in OpenAI's words,
and the usage (cache reads and writes counted in the input, as AG-UI counts them). The request
goes through the same transport (sse_transport.py: retries, timeouts, the runtime's error
codes); the ``anthropic`` package is used only by the tests, to prove the fake upstream's stream
is what it parses.
"""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator
from typing import Any

import orjson

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
    chunks_per_read,
)
from copilot_runtime.adapters.sse_transport import SseTransport, stream_cut, upstream_stream_errors
from copilot_runtime.events.reasoning import THINKING_BLOCKS

DEFAULT_BASE_URL = "https://api.anthropic.com"
_INSTRUCTION_ROLES = ("system", "developer")
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _document_block(file: dict[str, Any]) -> dict[str, Any]:
    """A ``file`` part (model_messages.media_content) as a document block titled with its
    file name: a PDF as base64 or by address (Anthropic fetches it), a text file as text."""
    data = str(file.get("file_data") or "")
    head, _, payload = data.partition(",")
    if head == "data:text/plain;base64":
        text = base64.b64decode(payload).decode("utf-8", errors="replace")
        source = {"type": "text", "media_type": "text/plain", "data": text}
    elif head.startswith("data:"):
        media_type = head[len("data:") :].split(";", 1)[0]
        source = {"type": "base64", "media_type": media_type, "data": payload}
    else:
        source = {"type": "url", "url": data}
    block: dict[str, Any] = {"type": "document", "source": source}
    if file.get("filename"):
        block["title"] = file["filename"]
    return block


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for part in content or []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            blocks.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url") or "")
            head, _, data = url.partition(",")
            if head.startswith("data:") and ";base64" in head:
                media_type = head[len("data:") :].split(";", 1)[0]
                blocks.append(
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": media_type, "data": data},
                    }
                )
            elif url.startswith(("https://", "http://")):
                # Anthropic fetches a linked image itself.
                blocks.append({"type": "image", "source": {"type": "url", "url": url}})
        elif part.get("type") == "file":
            blocks.append(_document_block(part.get("file") or {}))
    return blocks


def _arguments(raw: Any) -> Any:
    if isinstance(raw, dict):
        return raw
    try:
        value = orjson.loads(raw or "{}")
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def messages_request(request: ModelRequest) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages) for a Messages request: consecutive turns of one role merged."""
    system: list[str] = []
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": list(blocks)})

    for message in request.messages:
        role = message.get("role")
        if role in _INSTRUCTION_ROLES:
            text = _text(message.get("content"))
            if text:
                system.append(text)
        elif role == "user":
            add("user", _user_blocks(message.get("content")))
        elif role == "assistant":
            # Thinking first, as the model wrote it: with thinking on, Anthropic wants an
            # assistant turn's signed blocks back unchanged.
            blocks: list[dict[str, Any]] = list(message.get(THINKING_BLOCKS) or ())
            text = _text(message.get("content"))
            if text:
                blocks.append({"type": "text", "text": text})
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id"),
                        "name": function.get("name"),
                        "input": _arguments(function.get("arguments")),
                    }
                )
            add("assistant", blocks)
        elif role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": message.get("tool_call_id"),
                        "content": _text(message.get("content")),
                    }
                ],
            )
    return "\n\n".join(system), messages


def _tool_choice(request: ModelRequest) -> dict[str, Any] | None:
    choice = request.tool_choice
    mapped: dict[str, Any] | None
    if isinstance(choice, dict):
        mapped = {"type": "tool", "name": (choice.get("function") or {}).get("name")}
    elif choice == "required":
        mapped = {"type": "any"}
    elif choice in ("auto", "none"):
        mapped = {"type": choice}
    else:
        mapped = None
    if request.parallel_tool_calls is False:
        mapped = {**(mapped or {"type": "auto"}), "disable_parallel_tool_use": True}
    return mapped


def request_body(
    request: ModelRequest, *, model: str, max_tokens: int, thinking_budget: int = 0
) -> dict[str, Any]:
    system, messages = messages_request(request)
    body: dict[str, Any] = {
        "model": request.model or model,
        "max_tokens": request.max_tokens or max_tokens,
        "messages": messages,
        "stream": True,
    }
    if thinking_budget:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    if system:
        body["system"] = system
    if request.tools:
        body["tools"] = [
            {
                "name": (tool.get("function") or {}).get("name"),
                "description": (tool.get("function") or {}).get("description") or "",
                "input_schema": (tool.get("function") or {}).get("parameters")
                or {"type": "object", "properties": {}},
            }
            for tool in request.tools
        ]
        choice = _tool_choice(request)
        if choice is not None:
            body["tool_choice"] = choice
    if request.stop:
        body["stop_sequences"] = request.stop
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


class _StreamReader:
    """One response's events as model chunks (stateful: block indexes to tool-call indexes)."""

    def __init__(self) -> None:
        self.calls: dict[int, int] = {}  # content block index -> tool call index
        self.usage = UsageChunk()
        self.stopped = False  # message_stop seen: the stream ended as it should

    def feed_payload(self, data: bytes) -> list[ModelChunk]:
        """The chunks of one ``data:`` payload (an empty one, or one not an object: none)."""
        if not data:
            return []
        event = orjson.loads(data)
        return self.feed(event) if isinstance(event, dict) else []

    def feed(self, event: dict[str, Any]) -> list[ModelChunk]:
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            delta_type = delta.get("type")
            if delta_type == "text_delta":
                return [TextChunk(delta.get("text") or "")] if delta.get("text") else []
            if delta_type == "thinking_delta":
                thought = delta.get("thinking")
                return [ReasoningChunk(thought)] if isinstance(thought, str) and thought else []
            if delta_type == "signature_delta":
                # Sent once, just before the thinking block stops: it ends the block.
                return [ReasoningSealChunk(signature=str(delta.get("signature") or ""))]
            if delta.get("type") == "input_json_delta":
                index = self.calls.get(event.get("index", -1))
                fragment = delta.get("partial_json") or ""
                if index is None or not fragment:
                    return []
                return [ToolCallChunk(index=index, id=None, name=None, arguments_delta=fragment)]
            return []
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "redacted_thinking":
                return [ReasoningSealChunk(redacted=str(block.get("data") or ""))]
            if block.get("type") != "tool_use":
                return []
            index = self.calls[event.get("index", len(self.calls))] = len(self.calls)
            return [
                ToolCallChunk(
                    index=index, id=block.get("id"), name=block.get("name"), arguments_delta=""
                )
            ]
        if kind == "message_start":
            self._count((event.get("message") or {}).get("usage") or {})
            return []
        if kind == "message_delta":
            self._count(event.get("usage") or {})
            reason = (event.get("delta") or {}).get("stop_reason")
            return [FinishChunk(_STOP_REASONS.get(reason, reason))] if reason else []
        if kind == "message_stop":
            self.stopped = True
            return []
        if kind == "error":
            error = event.get("error") or {}
            raise UpstreamError(
                f"The model service failed mid-stream: {error.get('message') or error}",
                code="UPSTREAM_ERROR",
            )
        return []

    def _count(self, usage: dict[str, Any]) -> None:
        if "input_tokens" in usage:
            self.usage.input_tokens = int(usage.get("input_tokens") or 0)
        if "cache_read_input_tokens" in usage:
            self.usage.cached_input_tokens = int(usage.get("cache_read_input_tokens") or 0)
        if "cache_creation_input_tokens" in usage:
            self.usage.cache_write_input_tokens = int(usage.get("cache_creation_input_tokens") or 0)
        if "output_tokens" in usage:
            self.usage.output_tokens = int(usage.get("output_tokens") or 0)

    def total_usage(self) -> UsageChunk:
        # Anthropic counts cache reads and writes beside input_tokens; AG-UI's inputTokens
        # includes them.
        usage = self.usage
        usage.input_tokens += usage.cached_input_tokens + usage.cache_write_input_tokens
        return usage


class AnthropicAdapter:
    name = "anthropic"
    provider = "anthropic.messages"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        model: str,
        timeout: float,
        max_retries: int,
        max_tokens: int = 4096,
        version: str = "2023-06-01",
        thinking_budget: int = 0,
    ) -> None:
        self.default_model = model
        self.max_tokens = max_tokens
        # Extended thinking's token budget; 0: off (the API's default).
        self.thinking_budget = thinking_budget
        root = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        self._url = root.rstrip("/") + "/v1/messages"
        # The transport adds Content-Type (JSON) and Accept (text/event-stream) itself.
        headers = {
            "x-api-key": api_key or os.environ.get("ANTHROPIC_API_KEY", ""),
            "anthropic-version": version,
        }
        self._transport = SseTransport(headers=headers, timeout=timeout, max_retries=max_retries)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        body = request_body(
            request,
            model=self.default_model,
            max_tokens=self.max_tokens,
            thinking_budget=self.thinking_budget,
        )
        reader = _StreamReader()
        with upstream_stream_errors(item="event"):
            reads = self._transport.event_batches(self._url, body)
            async for chunk in chunks_per_read(reads, reader.feed_payload):
                yield chunk
        if not reader.stopped:
            raise stream_cut()
        yield reader.total_usage()

    async def aclose(self) -> None:
        """Close the connection pool (the runtime keeps one adapter per event loop)."""
        await self._transport.aclose()
