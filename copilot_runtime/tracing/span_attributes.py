"""The attributes of the spans derived from a run's events, in the GenAI semantic conventions
(``semconv.py``), and the content a span carries when content is captured.

Pure functions of the events' fields: what a span says, apart from when it opens and closes
(``span_tree.py``) and which event opens or closes it (``span_rules.py``).
"""

from __future__ import annotations

from typing import Any

import orjson

from copilot_runtime.tracing import semconv as attr

# A model call's request parameters under their semantic-convention names; any other
# parameter keeps its own name under ``copilot.request.``.
_REQUEST_PARAMETERS = {
    "max_tokens": attr.REQUEST_MAX_TOKENS,
    "temperature": attr.REQUEST_TEMPERATURE,
    "stop": attr.REQUEST_STOP_SEQUENCES,
    "tool_choice": attr.REQUEST_TOOL_CHOICE,
    "tools": attr.REQUEST_TOOLS_COUNT,
}


def root_attributes(
    *, agent_name: str, thread_id: str, run_id: str, provider: str, model: str
) -> dict[str, Any]:
    """The run span's attributes when it opens."""
    attributes = {
        attr.OPERATION_NAME: attr.OP_INVOKE_AGENT,
        attr.AGENT_NAME: agent_name,
        attr.CONVERSATION_ID: thread_id,
        attr.RUN_ID: run_id,
    }
    if provider:
        attributes[attr.PROVIDER_NAME] = provider
    if model:
        attributes[attr.REQUEST_MODEL] = model
    return attributes


def generation_attributes(
    *, model: str, thread_id: str, provider: str, parameters: dict[str, Any]
) -> dict[str, Any]:
    """A model call's span's attributes when it opens: what was asked of which model."""
    attributes: dict[str, Any] = {
        attr.OPERATION_NAME: attr.OP_CHAT,
        attr.REQUEST_MODEL: model,
        attr.CONVERSATION_ID: thread_id,
    }
    if provider:
        attributes[attr.PROVIDER_NAME] = provider
    attributes.update(
        {_REQUEST_PARAMETERS.get(key, f"copilot.request.{key}"): v for key, v in parameters.items()}
    )
    return attributes


def generation_end_attributes(end: Any, *, is_error: bool | None) -> dict[str, Any]:
    """A model call's span's attributes from its ``generation_end`` event: the model that
    answered, why it stopped, its usage."""
    attributes: dict[str, Any] = {attr.RESPONSE_MODEL: end.model}
    if end.finish_reason:
        attributes[attr.RESPONSE_FINISH_REASONS] = [end.finish_reason]
    attributes.update(
        {
            attr.USAGE_INPUT_TOKENS: end.input_tokens,
            attr.USAGE_OUTPUT_TOKENS: end.output_tokens,
            attr.USAGE_CACHE_READ_INPUT_TOKENS: end.cached_input_tokens,
            attr.USAGE_CACHE_CREATION_INPUT_TOKENS: getattr(end, "cache_write_input_tokens", 0),
            attr.USAGE_REASONING_OUTPUT_TOKENS: end.reasoning_tokens,
        }
    )
    if is_error:
        attributes[attr.ERROR_TYPE] = "model_error"
    return attributes


def tool_attributes(name: str, call_id: str) -> dict[str, Any]:
    """A tool span's attributes when it opens."""
    return {
        attr.OPERATION_NAME: attr.OP_EXECUTE_TOOL,
        attr.TOOL_NAME: name,
        attr.TOOL_CALL_ID: call_id,
        attr.TOOL_TYPE: "function",
    }


def guardrail_decision_attributes(event: Any) -> dict[str, Any]:
    """A ``guardrail_decision``'s span's attributes: the verdict, how it was reached, and the
    usage of the classifier call it may have made (``usage_of_decision``)."""
    denied = bool(getattr(event, "denied", False))
    attributes: dict[str, Any] = {
        f"{attr.GUARDRAIL_PREFIX}triggered": denied,
        f"{attr.GUARDRAIL_PREFIX}mode": str(getattr(event, "mode", "")),
        f"{attr.GUARDRAIL_PREFIX}evaluators": str(getattr(event, "evaluators", "")),
        f"{attr.GUARDRAIL_PREFIX}rules": int(getattr(event, "rules", 0) or 0),
        f"{attr.GUARDRAIL_PREFIX}latency_ms": int(getattr(event, "latency_ms", 0) or 0),
    }
    if getattr(event, "reason", ""):
        attributes[f"{attr.GUARDRAIL_PREFIX}reason"] = str(event.reason)
    model = str(getattr(event, "model", "") or "")
    if model:
        attributes.update({attr.REQUEST_MODEL: model, **usage_of_decision(event)})
    if denied:
        attributes[attr.ERROR_TYPE] = "guardrail_denied"
    return attributes


def usage_of_decision(event: Any) -> dict[str, int]:
    """The usage of a ``guardrail_decision``'s classifier call, by usage attribute."""
    return {
        attr.USAGE_INPUT_TOKENS: int(getattr(event, "input_tokens", 0) or 0),
        attr.USAGE_OUTPUT_TOKENS: int(getattr(event, "output_tokens", 0) or 0),
        attr.USAGE_CACHE_READ_INPUT_TOKENS: int(getattr(event, "cached_input_tokens", 0) or 0),
        attr.USAGE_CACHE_CREATION_INPUT_TOKENS: int(
            getattr(event, "cache_write_input_tokens", 0) or 0
        ),
        attr.USAGE_REASONING_OUTPUT_TOKENS: int(getattr(event, "reasoning_tokens", 0) or 0),
    }


def guardrail_attributes(payload: dict[str, Any], event_type: str) -> tuple[dict[str, Any], bool]:
    """Any other ``guardrail*`` event's span's attributes, from its payload's scalar fields,
    and whether it says the guardrail triggered."""
    status = str(payload.get("status") or "").lower()
    triggered = bool(
        payload.get("triggered")
        or payload.get("denied")
        or payload.get("allowed") is False
        or status in {"denied", "blocked", "triggered", "rejected"}
    )
    attributes = {
        f"{attr.GUARDRAIL_PREFIX}{k}": v
        for k, v in payload.items()
        if isinstance(v, str | int | float | bool) and v is not None
    }
    attributes[f"{attr.GUARDRAIL_PREFIX}event"] = event_type
    attributes[f"{attr.GUARDRAIL_PREFIX}triggered"] = triggered
    return attributes, triggered


def parse_arguments(text: str) -> Any:
    """A tool call's arguments: their JSON, ``{}`` when empty, the text kept when not JSON."""
    if not text.strip():
        return {}
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return {"_raw": text}


def parse_result(result: str) -> Any:
    """A tool's result: JSON when it is JSON, else the text."""
    try:
        return orjson.loads(result)
    except orjson.JSONDecodeError:
        return {"text": result}
