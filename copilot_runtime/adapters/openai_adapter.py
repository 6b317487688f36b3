"""The OpenAI-compatible adapter (OpenAI, Azure, vLLM, Ollama... through ``OPENAI_BASE_URL``).

The request is sent and its stream read by the raw transport (``sse_transport.py``) and parsed
with orjson: the ``openai`` package's HTTP pipeline and typed chunk objects cost more than
everything else on the hot path together, and importing it (with pydantic) cost a web process
about 30 MB, so the few things it resolved are resolved here, from the same environment
variables it reads.
"""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator, Callable
from itertools import repeat
from typing import Any
from urllib.parse import urlsplit

import msgspec
import orjson

from copilot_runtime.adapters.base import (
    FinishChunk,
    ModelChunk,
    ModelRequest,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    UpstreamError,
    UsageChunk,
    chunks_per_read,
    joined,
)
from copilot_runtime.adapters.sse_transport import SseTransport, upstream_stream_errors
from copilot_runtime.events.reasoning import THINKING_BLOCKS

_DATA_PREFIX = b"data: "
_DONE = b"[DONE]"


INSTRUCTION_ROLES = ("developer", "system")


def instruction_role(*, setting: str, url: str) -> str:
    """The role system and developer messages are sent with (``OPENAI_SYSTEM_ROLE``)."""
    if setting in INSTRUCTION_ROLES:
        return setting
    return "developer" if urlsplit(url).hostname == OPENAI_HOST else "system"


def with_instruction_role(messages: list[dict[str, Any]], role: str) -> list[dict[str, Any]]:
    """``messages`` with every instruction in ``role`` (the list is copied only if one is not)."""
    # The roles present, gathered in C (``map`` over ``dict.get``): this runs over the whole
    # history before every model request, where a generator's step per message costs many
    # times more.
    try:
        roles = set(map(dict.get, messages, repeat("role")))
    except TypeError:  # a message that is not a dict, or a role that is not a string
        roles = {m.get("role") for m in messages if isinstance(m.get("role"), str)}
    if not any(other in roles for other in INSTRUCTION_ROLES if other != role):
        return messages
    return [
        {**message, "role": role} if message.get("role") in INSTRUCTION_ROLES else message
        for message in messages
    ]


def _inlined_text(part: Any) -> Any:
    """A text document (a ``file`` part holding ``text/plain`` data) as a text part: chat
    completions take files as PDFs only, so its text is given with its file name."""
    if not isinstance(part, dict) or part.get("type") != "file":
        return part
    file = part.get("file") or {}
    head, _, data = str(file.get("file_data") or "").partition(",")
    if head != "data:text/plain;base64":
        return part
    text = base64.b64decode(data).decode("utf-8", errors="replace")
    return {"type": "text", "text": f"File {file.get('filename') or 'document.txt'}:\n{text}"}


def with_text_documents_inlined(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with text documents inlined; the list is copied only if one has parts."""
    # Whether any message has parts, checked in C (this runs over the whole history).
    try:
        if list not in set(map(type, map(dict.get, messages, repeat("content")))):
            return messages
    except TypeError:  # a message that is not a dict: left as it is
        return messages
    return [
        {**message, "content": [_inlined_text(part) for part in message["content"]]}
        if type(message.get("content")) is list
        else message
        for message in messages
    ]


def without_thinking(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` without Anthropic's thinking blocks (a thread that changed models): the
    chat completions API refuses a message field it does not know. Copied only if one has."""
    # Checked in C (``map`` over ``dict.__contains__``), as the roles are in
    # ``with_instruction_role``: this runs over the whole history before every request.
    try:
        carried = any(map(dict.__contains__, messages, repeat(THINKING_BLOCKS)))
    except TypeError:  # a message that is not a dict
        return messages
    if not carried:
        return messages
    return [
        {key: value for key, value in message.items() if key != THINKING_BLOCKS}
        if THINKING_BLOCKS in message
        else message
        for message in messages
    ]


def _request_body(
    request: ModelRequest, default_model: str, instruction_role: str
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model or default_model,
        "messages": with_text_documents_inlined(
            with_instruction_role(without_thinking(request.messages), instruction_role)
        ),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = request.tools
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.stop:
        body["stop"] = request.stop
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def parse_chunk(line: bytes) -> list[ModelChunk]:
    """The model chunks in one SSE ``data:`` line of a chat completion stream."""
    if not line:
        return []
    return _chunks_of(orjson.loads(line))


def parse_read(payloads: list[bytes]) -> tuple[list[ModelChunk], Exception | None]:
    """``parse_chunk`` over the payloads one read delivered, joined (``joined``), and what
    parsing them raised, if anything (the chunks are those before the payload that raised).

    The payloads are decoded in one call, and a plain text delta (most of a reply) is taken
    as its string, not as a chunk of its own to be joined later. They are decoded first into
    the few fields a text delta is told by (``_TypedChunk``), skipping the rest (ids, model,
    fingerprint...) without building it: about half the time of decoding every payload whole
    and walking its dicts. Any other payload is
    then decoded whole and parsed as ``parse_chunk`` parses it. A read that does not decode
    that way (a field of another type, bytes that are not UTF-8, not JSON) is parsed as
    before, payload by payload.

    One difference from decoding whole: a number beyond a double's range (``1e999``) in a
    field the runtime does not read is skipped in a text delta, where orjson refuses it."""
    payloads = [data for data in payloads if data]
    read = b"[" + b",".join(payloads) + b"]"
    typed = _typed(read)
    if typed is not None and len(typed) == len(payloads):
        texts = [_typed_text(chunk) for chunk in typed]
        return _assembled(texts, lambda position: orjson.loads(payloads[position]))
    try:
        decoded = orjson.loads(read)
    except orjson.JSONDecodeError:
        decoded = None  # one of them is not JSON: decoded one by one below, up to it
    if decoded is not None and len(decoded) != len(payloads):
        decoded = None  # a payload holding a comma of its own ("1,2"): one by one
    if decoded is None:
        decoded = []
        try:
            for data in payloads:
                decoded.append(orjson.loads(data))
        except Exception as error:
            texts = [_plain_text(payload) for payload in decoded]
            return _assembled(texts, decoded.__getitem__, failing=error)
    return _assembled([_plain_text(payload) for payload in decoded], decoded.__getitem__)


def _assembled(
    texts: list[str | None],
    whole: Callable[[int], Any],
    *,
    failing: Exception | None = None,
) -> tuple[list[ModelChunk], Exception | None]:
    """The chunks of a read's payloads, given each one's plain text (None: not a plain text
    delta, parsed from ``whole(position)``), joined; then what stopped them: parsing a payload,
    or ``failing`` (what decoding the payload after the last of ``texts`` raised)."""
    chunks: list[ModelChunk] = []
    text: list[str] = []
    for position, content in enumerate(texts):
        if content is not None:
            if content:  # an empty delta adds nothing (never an empty chunk)
                text.append(content)
            continue
        try:
            more = _chunks_of(whole(position))
        except Exception as error:
            failing = error
            break
        if text:
            chunks.append(TextChunk("".join(text)))
            text = []
        chunks += more
    if text:
        chunks.append(TextChunk("".join(text)))
    return joined(chunks), failing


class _TypedDelta(msgspec.Struct, gc=False):
    content: str | None = None
    tool_calls: Any = None
    # Reasoning rides in the same delta on vLLM and DeepSeek: such a delta is not plain text.
    reasoning_content: Any = None
    reasoning: Any = None


class _TypedChoice(msgspec.Struct, gc=False):
    delta: _TypedDelta | None = None
    finish_reason: Any = None


class _TypedChunk(msgspec.Struct, gc=False):
    """What tells a plain text delta from any other chunk; every other field is skipped."""

    choices: list[_TypedChoice] | None = None
    usage: Any = None
    error: Any = None


_TYPED_READ = msgspec.json.Decoder(list[_TypedChunk])


def _typed(read: bytes) -> list[_TypedChunk] | None:
    if not read.isascii():
        try:
            read.decode()  # skipped strings are not checked: bytes orjson refuses go its way
        except UnicodeDecodeError:
            return None
    try:
        return _TYPED_READ.decode(read)
    except (msgspec.DecodeError, RecursionError):
        return None


def _typed_text(chunk: _TypedChunk) -> str | None:
    """``_plain_text`` of a decoded ``_TypedChunk``."""
    choices = chunk.choices
    if choices is None or len(choices) != 1 or chunk.usage or chunk.error:
        return None
    choice = choices[0]
    delta = choice.delta
    if (
        delta is None
        or choice.finish_reason
        or delta.tool_calls
        or delta.reasoning_content
        or delta.reasoning
    ):
        return None
    return delta.content


def _plain_text(payload: Any) -> str | None:
    """A chunk's text when the chunk is nothing but a text delta (one choice, no tool call, no
    finish, no usage, no error); None otherwise. An empty delta is "": nothing to add."""
    if type(payload) is not dict or payload.get("usage") or payload.get("error"):
        return None
    choices = payload.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("finish_reason"):
        return None
    delta = choice.get("delta")
    if (
        type(delta) is not dict
        or delta.get("tool_calls")
        or delta.get("reasoning_content")
        or delta.get("reasoning")
    ):
        return None
    content = delta.get("content")
    return content if type(content) is str else None


def _text(value: Any, what: str) -> str:
    # Deltas are joined as strings: any other value would fail the join, after the read.
    if type(value) is not str:
        raise UpstreamError(
            f"The model service sent {what} that is not a string.", code="UPSTREAM_ERROR"
        )
    return value


def _chunks_of(payload: Any) -> list[ModelChunk]:
    chunks: list[ModelChunk] = []
    if isinstance(payload, dict) and payload.get("error"):
        error = payload["error"]
        message = error.get("message") if isinstance(error, dict) else str(error)
        raise UpstreamError(
            f"The model service failed mid-stream: {message}", code="UPSTREAM_ERROR"
        )
    for choice in payload.get("choices") or ():
        delta = choice.get("delta") or {}
        # vLLM and DeepSeek name it ``reasoning_content``, others (OpenRouter, newer vLLM)
        # ``reasoning``; a server sends one of them, read in that order as the AI SDK does.
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            chunks.append(ReasoningChunk(_text(reasoning, "a reasoning delta")))
        content = delta.get("content")
        if content:
            chunks.append(TextChunk(_text(content, "a text delta")))
        for call in delta.get("tool_calls") or ():
            function = call.get("function") or {}
            chunks.append(
                ToolCallChunk(
                    index=call.get("index", 0),
                    id=call.get("id"),
                    name=function.get("name"),
                    arguments_delta=_text(function.get("arguments") or "", "a call's arguments"),
                )
            )
        if choice.get("finish_reason"):
            chunks.append(FinishChunk(choice["finish_reason"]))
    usage = payload.get("usage")
    if usage:
        chunks.append(
            UsageChunk(
                input_tokens=usage.get("prompt_tokens") or 0,
                output_tokens=usage.get("completion_tokens") or 0,
                cached_input_tokens=(usage.get("prompt_tokens_details") or {}).get("cached_tokens")
                or 0,
                reasoning_tokens=(usage.get("completion_tokens_details") or {}).get(
                    "reasoning_tokens"
                )
                or 0,
            )
        )
    return chunks


OPENAI_HOST = "api.openai.com"
DEFAULT_BASE_URL = f"https://{OPENAI_HOST}/v1"


def openai_endpoint(*, api_key: str, base_url: str | None) -> tuple[str, dict[str, str]]:
    """The chat completions URL and headers, as the ``openai`` package would build them: the
    base URL given, else ``OPENAI_BASE_URL``, else OpenAI's; the organisation and project
    headers from ``OPENAI_ORG_ID`` and ``OPENAI_PROJECT_ID``."""
    root = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
    organization = os.environ.get("OPENAI_ORG_ID")
    if organization:
        headers["OpenAI-Organization"] = organization
    project = os.environ.get("OPENAI_PROJECT_ID")
    if project:
        headers["OpenAI-Project"] = project
    return root.rstrip("/") + "/chat/completions", headers


class OpenAIAdapter:
    name = "openai"
    provider = "openai.chat"

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str | None,
        model: str,
        timeout: float,
        max_retries: int,
        system_role: str = "auto",
        endpoint: tuple[str, dict[str, str]] | None = None,
    ) -> None:
        self.default_model = model
        # ``endpoint``: a URL and headers resolved elsewhere (Azure's deployment URL and key).
        url, headers = endpoint or openai_endpoint(api_key=api_key, base_url=base_url)
        self._url = url
        self.instruction_role = instruction_role(setting=system_role, url=url)
        self._transport = SseTransport(headers=headers, timeout=timeout, max_retries=max_retries)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        body = _request_body(request, self.default_model, self.instruction_role)
        with upstream_stream_errors(item="chunk"):
            reads = self._transport.event_batches(self._url, body)
            async for chunk in chunks_per_read(
                reads, parse_chunk, end=_DONE, parse_read=parse_read
            ):
                yield chunk

    async def aclose(self) -> None:
        """Close the connection pool (the runtime keeps one adapter per event loop)."""
        await self._transport.aclose()
