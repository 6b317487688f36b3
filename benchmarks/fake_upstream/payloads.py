"""OpenAI-shaped JSON: streamed chunks, whole completions and error bodies.

Content chunks are the hot path of the benchmark, so their constant part is encoded once per
response and each token only costs one small `orjson.dumps` of the token string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from benchmarks.fake_upstream.directives import ErrorSpec
from benchmarks.fake_upstream.plan import ReplyPlan, ToolCallPlan

SYSTEM_FINGERPRINT = "fp_fake_upstream"
DONE_EVENT = b"data: [DONE]\n\n"


class ChunkEncoder:
    """Encodes the `data: {...}\\n\\n` SSE events of one streamed completion."""

    def __init__(self, *, completion_id: str, created: int, model: str, include_usage: bool):
        self._envelope: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
        }
        # Like the real API, every chunk carries "usage": null when usage was requested.
        self._include_usage = include_usage
        envelope = orjson.dumps(self._envelope)[:-1]  # reopen the object to append choices
        self._content_prefix = b'data: %b,"choices":[{"index":0,"delta":{"content":' % envelope
        self._content_suffix = b'},"logprobs":null,"finish_reason":null}]%b}\n\n' % (
            b',"usage":null' if include_usage else b""
        )

    def content(self, token: str) -> bytes:
        return self._content_prefix + orjson.dumps(token) + self._content_suffix

    def role(self, *, has_content: bool) -> bytes:
        delta = {"role": "assistant", "content": "" if has_content else None, "refusal": None}
        return self._choice_event(delta, finish_reason=None)

    def tool_call_start(self, index: int, call: ToolCallPlan) -> bytes:
        delta = {
            "tool_calls": [
                {
                    "index": index,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }
            ]
        }
        return self._choice_event(delta, finish_reason=None)

    def reasoning(self, field: str, token: str) -> bytes:
        return self._choice_event({field: token}, finish_reason=None)

    def tool_call_arguments(self, index: int, fragment: str) -> bytes:
        delta = {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}
        return self._choice_event(delta, finish_reason=None)

    def finish(self, finish_reason: str) -> bytes:
        return self._choice_event({}, finish_reason=finish_reason)

    def usage(self, usage: Mapping[str, Any]) -> bytes:
        return self._event({**self._envelope, "choices": [], "usage": usage})

    def _choice_event(self, delta: Mapping[str, Any], *, finish_reason: str | None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        event: dict[str, Any] = {**self._envelope, "choices": [choice]}
        if self._include_usage:
            event["usage"] = None
        return self._event(event)

    @staticmethod
    def _event(payload: Mapping[str, Any]) -> bytes:
        return b"data: " + orjson.dumps(payload) + b"\n\n"


def stream_events(
    plan: ReplyPlan, encoder: ChunkEncoder, *, include_usage: bool
) -> list[tuple[bytes, bool]]:
    """All SSE events of a streamed reply, each flagged whether it carries a token."""
    events: list[tuple[bytes, bool]] = [
        (encoder.role(has_content=bool(plan.content_tokens)), False)
    ]
    # Reasoning comes before the answer, as reasoning models stream it (not counted as tokens:
    # ``fail_after_tokens`` counts the answer's).
    events.extend(
        (encoder.reasoning(plan.reasoning_field, token), False) for token in plan.reasoning_tokens
    )
    events.extend((encoder.content(token), True) for token in plan.content_tokens)
    for index, call in enumerate(plan.tool_calls):
        events.append((encoder.tool_call_start(index, call), True))
        events.extend(
            (encoder.tool_call_arguments(index, fragment), True)
            for fragment in call.argument_fragments
        )
    events.append((encoder.finish(plan.finish_reason), False))
    if include_usage:
        events.append((encoder.usage(plan.usage), False))
    events.append((DONE_EVENT, False))
    return events


def completion_body(
    plan: ReplyPlan, *, completion_id: str, created: int, model: str
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": plan.content, "refusal": None}
    if plan.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": "".join(call.argument_fragments)},
            }
            for call in plan.tool_calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": plan.finish_reason,
            }
        ],
        "usage": plan.usage,
    }


def error_body(*, message: str, status: int, type_: str | None, code: str | None) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": type_ or _default_error_type(status),
            "param": None,
            "code": code,
        }
    }


def scripted_error_body(error: ErrorSpec) -> dict[str, Any]:
    code = error.code if error.code is not None else _default_error_code(error.status)
    return error_body(message=error.message, status=error.status, type_=error.type, code=code)


def _default_error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def _default_error_code(status: int) -> str | None:
    return "rate_limit_exceeded" if status == 429 else None
