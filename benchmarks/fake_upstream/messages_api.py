"""Anthropic's Messages API on the fake: ``POST /v1/messages``, from the same directives.

The request is read into the chat shape the plan understands (``system`` first; a user message
made only of ``tool_result`` blocks is the tool's answer, not a user turn), the reply is
planned as for chat completions, and written as Anthropic writes it: ``message_start``, a
``content_block_start``/``_delta``/``_stop`` run per text or ``tool_use`` block (arguments as
``input_json_delta`` fragments), ``message_delta`` with the stop reason and output tokens, and
``message_stop``; or a whole ``message``; or ``{"type": "error", "error": {...}}`` with the
directive's status. Usage: input = prompt words (a directive's ``usage`` may set
``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
``cache_creation_input_tokens``), output = token-bearing deltas. Extended thinking: thinking.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import orjson

from benchmarks.fake_upstream import http1
from benchmarks.fake_upstream.messages_stop import Stop
from benchmarks.fake_upstream.plan import ReplyPlan, content_text
from benchmarks.fake_upstream.responder import (
    Outcome,
    _flush,
    _wait_for_client_close,
)
from benchmarks.fake_upstream.thinking import streamed_blocks, thinking_blocks

MESSAGES_PATH = "/messages"
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def chat_shaped(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Messages request as chat messages, for the plan and the default reply."""
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        out.append({"role": "system", "content": content_text(system)})
    for message in body.get("messages") or []:
        if not isinstance(message, Mapping):
            continue
        role, content = message.get("role"), message.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        blocks = [block for block in content or [] if isinstance(block, Mapping)]
        results = [block for block in blocks if block.get("type") == "tool_result"]
        texts = [block for block in blocks if block.get("type") == "text"]
        for result in results:
            out.append({"role": "tool", "content": content_text(result.get("content"))})
        if texts or not results:
            out.append({"role": role, "content": content_text(texts)})
    return out


def _usage(plan: ReplyPlan) -> dict[str, int]:
    usage = {
        "input_tokens": int(plan.usage.get("prompt_tokens") or 0),
        "output_tokens": plan.token_count,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    for key in _USAGE_KEYS:
        if isinstance(plan.usage.get(key), int):
            usage[key] = plan.usage[key]
    return usage


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def stream_events(
    plan: ReplyPlan, stop: Stop, *, message_id: str, model: str, thinking: bool = False
) -> list[tuple[bytes, bool]]:
    """(bytes, carries a token) per event, in order."""
    usage = _usage(plan)
    start_usage = {**usage, "output_tokens": 0}
    events: list[tuple[bytes, bool]] = [
        (
            _event(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": start_usage,
                    },
                },
            ),
            False,
        )
    ]
    index = 0
    if thinking:  # thinking.py: only when the request enables it, as Anthropic does
        blocks = streamed_blocks(plan, index)
        events.extend((_event(kind, payload), False) for kind, payload in blocks)
        index += sum(kind == "content_block_stop" for kind, _ in blocks)
    if plan.content_tokens:
        events.append(
            (
                _event(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                False,
            )
        )
        for token in plan.content_tokens:
            delta = {"type": "text_delta", "text": token}
            events.append(
                (
                    _event(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": delta},
                    ),
                    True,
                )
            )
        events.append(
            (_event("content_block_stop", {"type": "content_block_stop", "index": index}), False)
        )
        index += 1
    for call in plan.tool_calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        events.append(
            (
                _event(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": block},
                ),
                True,
            )
        )
        for fragment in call.argument_fragments:
            delta = {"type": "input_json_delta", "partial_json": fragment}
            events.append(
                (
                    _event(
                        "content_block_delta",
                        {"type": "content_block_delta", "index": index, "delta": delta},
                    ),
                    True,
                )
            )
        events.append(
            (_event("content_block_stop", {"type": "content_block_stop", "index": index}), False)
        )
        index += 1
    ending = {"stop_reason": stop.reason, "stop_sequence": stop.sequence}
    events.append(
        (
            _event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": ending,
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            ),
            False,
        )
    )
    events.append((_event("message_stop", {"type": "message_stop"}), False))
    return events


def message_body(
    plan: ReplyPlan, stop: Stop, *, message_id: str, model: str, thinking: bool = False
) -> dict[str, Any]:
    content: list[dict[str, Any]] = thinking_blocks(plan) if thinking else []
    if plan.content_tokens:
        content.append({"type": "text", "text": "".join(plan.content_tokens)})
    for call in plan.tool_calls:
        raw = "".join(call.argument_fragments)
        try:
            arguments = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            arguments = {}
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": arguments})
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop.reason,
        "stop_sequence": stop.sequence,
        "usage": _usage(plan),
    }


def error_body(status: int, message: str, type_: str | None) -> dict[str, Any]:
    default = "api_error" if status >= 500 else "invalid_request_error"
    return {
        "type": "error",
        "error": {"type": type_ or _ERROR_TYPES.get(status, default), "message": message},
    }


async def send_messages_reply(
    *,
    plan: ReplyPlan,
    stop: Stop,
    message_id: str,
    model: str,
    stream: bool,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    keep_alive: bool,
    thinking: bool = False,
    refused: str | None = None,
) -> Outcome:
    """``thinking``: the request enabled it; ``refused``: why the request is refused (400)."""
    headers = [("request-id", f"req_{message_id}")]
    try:
        if refused is not None:
            body = error_body(400, refused, None)
            writer.write(
                http1.json_response(400, body, keep_alive=keep_alive, extra_headers=headers)
            )
            await writer.drain()
            return Outcome.COMPLETED
        if plan.hang_before_headers or (plan.hang and not stream):
            return await _wait_for_client_close(reader)
        if plan.error is not None:
            if plan.error.retry_after is not None:
                headers.append(("retry-after", f"{plan.error.retry_after:g}"))
            body = error_body(plan.error.status, plan.error.message, plan.error.type)
            writer.write(
                http1.json_response(
                    plan.error.status, body, keep_alive=keep_alive, extra_headers=headers
                )
            )
            await writer.drain()
            return Outcome.COMPLETED
        if not stream:
            if plan.token_delay_s > 0 and plan.token_count:
                await asyncio.sleep(plan.token_delay_s * plan.token_count)
            if plan.fail_after_tokens is not None:
                return Outcome.CUT_OFF
            body = message_body(plan, stop, message_id=message_id, model=model, thinking=thinking)
            writer.write(
                http1.json_response(200, body, keep_alive=keep_alive, extra_headers=headers)
            )
            await writer.drain()
            return Outcome.COMPLETED
        writer.write(http1.stream_head(keep_alive=keep_alive, extra_headers=headers))
        if plan.hang:
            await writer.drain()
            return await _wait_for_client_close(reader)
        events = stream_events(plan, stop, message_id=message_id, model=model, thinking=thinking)
        return await _send(plan, events, reader=reader, writer=writer)
    except ConnectionError:
        return Outcome.CLIENT_CLOSED


async def _send(
    plan: ReplyPlan,
    events: list[tuple[bytes, bool]],
    *,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> Outcome:
    pending: list[bytes] = []
    seen = 0
    for data, carries_token in events:
        if carries_token:
            if plan.fail_after_tokens is not None and seen >= plan.fail_after_tokens:
                await _flush(pending, writer)
                return Outcome.CUT_OFF
            seen += 1
            if plan.token_delay_s > 0:
                await _flush(pending, writer)
                await asyncio.sleep(plan.token_delay_s)
                if reader.at_eof():
                    return Outcome.CLIENT_CLOSED
        pending.append(http1.chunk(data))
    pending.append(http1.LAST_CHUNK)
    await _flush(pending, writer)
    return Outcome.COMPLETED
