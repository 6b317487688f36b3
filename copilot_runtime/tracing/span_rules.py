"""What each event of a run does to its span tree: one rule per event type, by kind of span.

A rule takes the tree (``span_tree.py``), the event and its time, changes the tree and returns
the signals it produced. ``RULES`` maps event types to rules; ``GUARDRAIL`` is the rule of any
other event whose type starts with ``guardrail``. The ``text_delta`` of every token has no rule:
``SpanDeriver.observe`` handles it inline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing.signals import (
    KIND_GENERATION,
    KIND_GUARDRAIL,
    KIND_REASONING,
    KIND_TOOL,
    Signal,
    SpanAnnotated,
)
from copilot_runtime.tracing.span_attributes import (
    generation_attributes,
    generation_end_attributes,
    guardrail_attributes,
    guardrail_decision_attributes,
    parse_arguments,
    parse_result,
    tool_attributes,
    usage_of_decision,
)
from copilot_runtime.tracing.span_tree import ROOT_KEY, Generation, PendingTool, SpanTree

Rule = Callable[[SpanTree, Any, float], Sequence[Signal]]


def _first_chunk(tree: SpanTree, at: float) -> None:
    """The model call's first output (text, a tool call, reasoning) came at ``at``."""
    generation = tree.generation
    if generation is not None and generation.first_chunk_at is None:
        generation.first_chunk_at = at


# --- generations ------------------------------------------------------------------------------


def _generation_start(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    signals: list[Signal] = []
    if tree.generation is not None:  # a call that never reported its end
        signals.append(tree.close_generation(at, incomplete=True))
    tree.generation_count += 1
    tree.totals.generations += 1
    key = f"generation:{tree.generation_count}"
    tree.generation = Generation(key=key, model=event.model, started_at=at)
    tree.last_failed_generation = None
    attributes = generation_attributes(
        model=event.model,
        thread_id=tree.root.thread_id,
        provider=tree.root.provider,
        parameters=event.parameters or {},
    )
    request = getattr(event, "request", None)
    sent = None
    if tree.capture_content and request is not None:
        # References to what the call was sent, not a copy (tracing/content.py).
        sent = tree.content.call_input(request=request, history=tree.root.history)
    signals.append(
        tree.open_span(
            key,
            kind=KIND_GENERATION,
            name=f"{attr.OP_CHAT} {event.model}",
            at=at,
            input=sent,
            attributes=attributes,
        )
    )
    return signals


def _generation_end(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    generation = tree.generation
    if generation is None:
        return []
    totals = tree.totals
    totals.input_tokens += event.input_tokens
    totals.output_tokens += event.output_tokens
    totals.cached_input_tokens += event.cached_input_tokens
    totals.cache_write_input_tokens += getattr(event, "cache_write_input_tokens", 0)
    totals.reasoning_tokens += event.reasoning_tokens
    failed = event.finish_reason == "error"
    if failed:
        tree.last_failed_generation = generation.key
    is_error = True if failed else None
    attributes = generation_end_attributes(event, is_error=is_error)
    return [tree.close_generation(at, attributes=attributes, is_error=is_error)]


# --- tools ------------------------------------------------------------------------------------


def _action_start(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    _first_chunk(tree, at)
    tree.pending_tools[event.action_execution_id] = PendingTool(name=event.action_name)
    return []


def _action_args(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    _first_chunk(tree, at)
    if tree.capture_content:
        pending = tree.pending_tools.get(event.action_execution_id)
        if pending is not None:
            pending.arguments.append(event.delta)
    return []


def _action_end(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    """The call's arguments are complete: its tool span opens."""
    call_id = event.action_execution_id
    pending = tree.pending_tools.pop(call_id, None)
    key = f"tool:{call_id}"
    if pending is None or key in tree.open_spans:
        return []
    tree.totals.tool_calls += 1
    arguments = None
    if tree.capture_content:
        arguments = parse_arguments("".join(pending.arguments))
        # The call's answer is redacted as a whole when it closes; the tool's input here.
        if tree.generation is not None:
            tree.generation.tool_calls.append(
                {"id": call_id, "name": pending.name, "arguments": arguments}
            )
        arguments = tree.content.redact(arguments)
    return [
        tree.open_span(
            key,
            kind=KIND_TOOL,
            name=f"{attr.OP_EXECUTE_TOOL} {pending.name}",
            at=at,
            input=arguments,
            attributes=tool_attributes(pending.name, call_id),
        )
    ]


def _action_result(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    call_id = event.action_execution_id
    key = f"tool:{call_id}"
    signals: list[Signal] = []
    attributes: dict[str, Any] = {}
    if event.is_error:
        attributes[attr.ERROR_TYPE] = "tool_error"
    if key not in tree.open_spans:
        # A call made in an earlier run (approved, and executed now): the execution
        # happened just before this result, so it is a span of no duration.
        tree.totals.tool_calls += 1
        opened = tool_attributes(event.action_name, call_id)
        opened["copilot.tool.resumed"] = True
        signals.append(
            tree.open_span(
                key,
                kind=KIND_TOOL,
                name=f"{attr.OP_EXECUTE_TOOL} {event.action_name}",
                at=at,
                attributes=opened,
            )
        )
    signals.append(
        tree.end_span(
            key,
            at,
            output=parse_result(event.result) if tree.capture_content else None,
            attributes=attributes,
            is_error=bool(event.is_error),
        )
    )
    return signals


# --- reasoning --------------------------------------------------------------------------------


def _reasoning_start(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    key = f"reasoning:{event.message_id}"
    if key in tree.open_spans:
        return []
    _first_chunk(tree, at)
    tree.reasoning_text[key] = []
    return [
        tree.open_span(
            key, kind=KIND_REASONING, name="reasoning", at=at, parent_key=tree.current_parent
        )
    ]


def _reasoning_delta(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    parts = tree.reasoning_text.get(f"reasoning:{event.message_id}")
    if parts is not None and tree.capture_content:
        parts.append(event.delta)
    return []


def _reasoning_end(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    key = f"reasoning:{event.message_id}"
    if key not in tree.open_spans:
        return []
    return [tree.end_span(key, at, output=tree.reasoning_output(key))]


# --- the run ----------------------------------------------------------------------------------


def _agent_state(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    tree.totals.state_snapshots += 1
    return []


def _meta_event(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    tree.totals.interrupts.append(str(event.name))
    return []


def _limit_trip(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    tree.totals.limit_trips.append(str(event.kind))
    return []


def _run_error(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    tree.totals.error_code = event.code
    tree.totals.error_message = event.message
    failed = tree.last_failed_generation
    if failed is None:
        return []
    # The model call that failed closed just before this error: say why on it.
    tree.last_failed_generation = None
    return [
        SpanAnnotated(
            key=failed,
            attributes={attr.ERROR_TYPE: event.code, attr.ERROR_MESSAGE: event.message},
            is_error=True,
        )
    ]


def _run_finished(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    tree.totals.status = event.status
    return []


# --- guardrails -------------------------------------------------------------------------------


def _guardrail_decision(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    """The guardrails' verdict on the turn's input: a span ending now that lasted the
    evaluation's latency, with the usage of the classifier call it may have made."""
    denied = bool(getattr(event, "denied", False))
    latency = max(float(getattr(event, "latency_ms", 0) or 0), 0.0) / 1000
    attributes = guardrail_decision_attributes(event)
    if str(getattr(event, "model", "") or ""):
        # A classifier call: counted in the run's usage (and priced with it).
        usage = usage_of_decision(event)
        totals = tree.totals
        totals.input_tokens += usage[attr.USAGE_INPUT_TOKENS]
        totals.output_tokens += usage[attr.USAGE_OUTPUT_TOKENS]
        totals.cached_input_tokens += usage[attr.USAGE_CACHE_READ_INPUT_TOKENS]
        totals.cache_write_input_tokens += usage[attr.USAGE_CACHE_CREATION_INPUT_TOKENS]
        totals.reasoning_tokens += usage[attr.USAGE_REASONING_OUTPUT_TOKENS]
    key = tree.point_span_key("guardrail")
    opened = tree.open_span(
        key,
        kind=KIND_GUARDRAIL,
        name=f"guardrail {getattr(event, 'name', '') or 'input'}",
        at=at - latency,
        parent_key=ROOT_KEY,
        attributes=attributes,
    )
    closed = tree.close_span(key, at, is_error=denied)
    assert closed is not None
    return [opened, closed]


def _guardrail(tree: SpanTree, event: Any, at: float) -> list[Signal]:
    """Any other ``guardrail*`` event: a decision, drawn as a span of no duration."""
    payload = event.to_payload() if hasattr(event, "to_payload") else dict(vars(event))
    name = str(payload.get("name") or payload.get("rule") or event.type)
    attributes, triggered = guardrail_attributes(payload, event.type)
    key = tree.point_span_key("guardrail")
    opened = tree.open_span(
        key,
        kind=KIND_GUARDRAIL,
        name=f"guardrail {name}",
        at=at,
        parent_key=tree.current_parent,
        attributes=attributes,
    )
    closed = tree.close_span(key, at, is_error=triggered)
    assert closed is not None
    return [opened, closed]


GUARDRAIL: Rule = _guardrail

RULES: dict[str, Rule] = {
    "generation_start": _generation_start,
    "generation_end": _generation_end,
    "action_start": _action_start,
    "action_args": _action_args,
    "action_end": _action_end,
    "action_result": _action_result,
    "reasoning_start": _reasoning_start,
    "reasoning_delta": _reasoning_delta,
    "reasoning_end": _reasoning_end,
    "agent_state": _agent_state,
    "meta_event": _meta_event,
    "limit_trip": _limit_trip,
    "run_error": _run_error,
    "run_finished": _run_finished,
    "guardrail_decision": _guardrail_decision,
}
