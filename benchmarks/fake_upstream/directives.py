"""Parsing and validation of scripting directives (see the package docstring for the format).

Directives are validated eagerly, when they are queued or found in a message, so a typo in a
test shows up as a clear error instead of a silently ignored key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

INLINE_PREFIX = "FAKE:"

_T = TypeVar("_T")

_DIRECTIVE_KEYS = frozenset(
    {
        "text",
        "tokens",
        "tool_calls",
        "error",
        "fail_after_tokens",
        "hang",
        "hang_before_headers",
        "delay_ms",
        "steps",
        "repeat_last",
        "usage",
        "reasoning",
        "reasoning_field",
        "redacted_thinking",
    }
)
# The delta fields servers stream reasoning in (vLLM and DeepSeek, others).
REASONING_FIELDS = ("reasoning_content", "reasoning")
_TOOL_CALL_KEYS = frozenset({"name", "arguments", "id", "fragments"})
_ERROR_KEYS = frozenset({"status", "message", "retry_after", "type", "code"})
_STEP_ONLY_KEYS = ("steps", "repeat_last")


class DirectiveError(ValueError):
    """A directive that does not follow the documented format."""


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    name: str
    arguments: str  # always the raw wire string; objects are encoded when parsed
    id: str | None
    fragments: int


@dataclass(frozen=True, slots=True)
class ErrorSpec:
    status: int
    message: str
    retry_after: float | None
    type: str | None
    code: str | None


@dataclass(frozen=True, slots=True)
class Directive:
    text: str | None = None
    tokens: int | None = None
    tool_calls: tuple[ToolCallSpec, ...] = ()
    error: ErrorSpec | None = None
    fail_after_tokens: int | None = None
    hang: bool = False
    hang_before_headers: bool = False
    delay_ms: float | None = None
    steps: tuple[Directive, ...] = ()
    repeat_last: bool = False
    usage: Mapping[str, Any] | None = None
    reasoning: str | None = None
    reasoning_field: str = REASONING_FIELDS[0]
    redacted_thinking: str | None = None


def parse_directive(raw: object) -> Directive:
    """Validate one directive object (as decoded from JSON) into a `Directive`."""
    return _parse(raw, allow_steps=True, where="directive")


def parse_inline_directive(text: str) -> Directive | None:
    """Return the directive of the first `FAKE: {...}` line in a message text, if any."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith(INLINE_PREFIX):
            continue
        try:
            raw = orjson.loads(stripped[len(INLINE_PREFIX) :])
        except orjson.JSONDecodeError as error:
            raise DirectiveError(f"invalid JSON after {INLINE_PREFIX}: {error}") from error
        return parse_directive(raw)
    return None


def strip_inline_directives(text: str) -> str:
    """The message text without its `FAKE:` lines (what a default reply echoes)."""
    lines = [line for line in text.splitlines() if not line.strip().startswith(INLINE_PREFIX)]
    return "\n".join(lines).strip()


def select_step(directive: Directive, *, assistant_turns: int) -> Directive:
    """Pick the step of a multi-step directive for the model call being answered.

    Fields written next to `steps` were merged into every step when parsing; past the end of
    the list (without `repeat_last`) only those shared fields apply.
    """
    if not directive.steps:
        return directive
    if assistant_turns < len(directive.steps):
        return directive.steps[assistant_turns]
    if directive.repeat_last:
        return directive.steps[-1]
    return Directive(
        text=directive.text,
        tokens=directive.tokens,
        tool_calls=directive.tool_calls,
        error=directive.error,
        fail_after_tokens=directive.fail_after_tokens,
        hang=directive.hang,
        hang_before_headers=directive.hang_before_headers,
        delay_ms=directive.delay_ms,
        usage=directive.usage,
        reasoning=directive.reasoning,
        reasoning_field=directive.reasoning_field,
        redacted_thinking=directive.redacted_thinking,
    )


def _parse(raw: object, *, allow_steps: bool, where: str) -> Directive:
    fields = _require_mapping(raw, where=where)
    _reject_unknown(fields, allowed=_DIRECTIVE_KEYS, where=where)
    steps: tuple[Directive, ...] = ()
    if "steps" in fields:
        if not allow_steps:
            raise DirectiveError(f"{where}: steps cannot be nested")
        raw_steps = fields["steps"]
        if not isinstance(raw_steps, list) or not raw_steps:
            raise DirectiveError(f"{where}: steps must be a non-empty list")
        shared = {key: value for key, value in fields.items() if key not in _STEP_ONLY_KEYS}
        steps = tuple(
            _parse(
                {**shared, **_require_mapping(step, where=f"{where}.steps[{index}]")},
                allow_steps=False,
                where=f"{where}.steps[{index}]",
            )
            for index, step in enumerate(raw_steps)
        )
    elif "repeat_last" in fields:
        raise DirectiveError(f"{where}: repeat_last only makes sense with steps")

    raw_calls = fields.get("tool_calls", [])
    if not isinstance(raw_calls, list):
        raise DirectiveError(f"{where}: tool_calls must be a list")
    usage = fields.get("usage")
    if usage is not None and not isinstance(usage, Mapping):
        raise DirectiveError(f"{where}: usage must be an object")
    reasoning_field = fields.get("reasoning_field", REASONING_FIELDS[0])
    if reasoning_field not in REASONING_FIELDS:
        raise DirectiveError(
            f"{where}: reasoning_field must be one of {', '.join(REASONING_FIELDS)}"
        )
    return Directive(
        text=_optional(fields, "text", str, where=where),
        tokens=_optional_count(fields, "tokens", where=where),
        tool_calls=tuple(
            _parse_tool_call(call, where=f"{where}.tool_calls[{index}]")
            for index, call in enumerate(raw_calls)
        ),
        error=_parse_error(fields["error"], where=f"{where}.error") if "error" in fields else None,
        fail_after_tokens=_optional_count(fields, "fail_after_tokens", where=where),
        hang=_flag(fields, "hang", where=where),
        hang_before_headers=_flag(fields, "hang_before_headers", where=where),
        delay_ms=_optional_number(fields, "delay_ms", where=where),
        steps=steps,
        repeat_last=_flag(fields, "repeat_last", where=where),
        usage=dict(usage) if usage is not None else None,
        reasoning=_optional(fields, "reasoning", str, where=where),
        reasoning_field=reasoning_field,
        redacted_thinking=_optional(fields, "redacted_thinking", str, where=where),
    )


def _parse_tool_call(raw: object, *, where: str) -> ToolCallSpec:
    fields = _require_mapping(raw, where=where)
    _reject_unknown(fields, allowed=_TOOL_CALL_KEYS, where=where)
    name = fields.get("name")
    if not isinstance(name, str) or not name:
        raise DirectiveError(f"{where}: name must be a non-empty string")
    arguments = fields.get("arguments", {})
    # A string is sent verbatim so tests can produce empty or broken arguments on purpose.
    encoded = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    fragments = _optional_count(fields, "fragments", where=where)
    return ToolCallSpec(
        name=name,
        arguments=encoded,
        id=_optional(fields, "id", str, where=where),
        fragments=max(1, fragments if fragments is not None else 3),
    )


def _parse_error(raw: object, *, where: str) -> ErrorSpec:
    fields = _require_mapping(raw, where=where)
    _reject_unknown(fields, allowed=_ERROR_KEYS, where=where)
    status = fields.get("status")
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
        raise DirectiveError(f"{where}: status must be an HTTP error status (400-599)")
    return ErrorSpec(
        status=status,
        message=_optional(fields, "message", str, where=where) or f"Fake upstream error {status}",
        retry_after=_optional_number(fields, "retry_after", where=where),
        type=_optional(fields, "type", str, where=where),
        code=_optional(fields, "code", str, where=where),
    )


def _require_mapping(raw: object, *, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise DirectiveError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    return raw


def _reject_unknown(fields: Mapping[str, Any], *, allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(fields) - allowed)
    if unknown:
        raise DirectiveError(f"{where}: unknown field(s) {', '.join(unknown)}")


def _optional(fields: Mapping[str, Any], key: str, kind: type[_T], *, where: str) -> _T | None:
    value = fields.get(key)
    if value is not None and not isinstance(value, kind):
        raise DirectiveError(f"{where}: {key} must be a {kind.__name__}")
    return value


def _optional_count(fields: Mapping[str, Any], key: str, *, where: str) -> int | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise DirectiveError(f"{where}: {key} must be a non-negative integer")
    return value


def _optional_number(fields: Mapping[str, Any], key: str, *, where: str) -> float | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
        raise DirectiveError(f"{where}: {key} must be a non-negative number")
    return float(value)


def _flag(fields: Mapping[str, Any], key: str, *, where: str) -> bool:
    value = fields.get(key, False)
    if not isinstance(value, bool):
        raise DirectiveError(f"{where}: {key} must be true or false")
    return value
