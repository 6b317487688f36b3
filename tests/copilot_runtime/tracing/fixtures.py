"""Event sequences of whole runs, as the engine emits them, for the span deriver's tests.

Each fixture is a list of events; event ``i`` happens at time ``i + 1`` (``derive_spans``'s
default), which keeps expected times readable. Event types the runtime does not emit yet
(reasoning, guardrails) are stood in for by small classes with the type names the deriver
handles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    GenerationEnd,
    GenerationStart,
    LimitTrip,
    MetaEvent,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunError,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.tracing.deriver import SpanDeriver
from copilot_runtime.tracing.signals import Signal
from copilot_runtime.tracing.span_tree import RunSpanSpec

MODEL = "gpt-4o-mini"


@dataclass
class GuardrailResult:
    type: ClassVar[str] = "guardrail_result"
    name: str
    status: str
    reason: str = ""

    def to_payload(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GuardrailDecisionEvent:
    """Shaped like the guardrails' ``guardrail_decision`` event."""

    type: ClassVar[str] = "guardrail_decision"
    denied: bool
    reason: str = ""
    name: str = "input"
    mode: str = "blocking"
    evaluators: str = ""
    rules: int = 0
    latency_ms: int = 0
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0


def generation_start(**parameters: Any) -> GenerationStart:
    return GenerationStart(model=MODEL, parameters=parameters)


def generation_end(
    finish_reason: str = "stop", *, input_tokens: int = 10, output_tokens: int = 5, **usage: int
) -> GenerationEnd:
    return GenerationEnd(
        model=MODEL,
        finish_reason=finish_reason,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        **usage,
    )


def text(message_id: str, *deltas: str) -> list[Event]:
    return [
        TextStart(message_id=message_id),
        *(TextDelta(message_id=message_id, delta=d) for d in deltas),
        TextEnd(message_id=message_id),
    ]


def tool_call(call_id: str, name: str, *argument_parts: str) -> list[Event]:
    """A streamed call whose arguments are complete (its ActionEnd included)."""
    return [
        ActionStart(action_execution_id=call_id, action_name=name, parent_message_id="m1"),
        *(ActionArgs(action_execution_id=call_id, delta=part) for part in argument_parts),
        ActionEnd(action_execution_id=call_id),
    ]


def result(call_id: str, name: str, value: str, *, is_error: bool = False) -> ActionResult:
    return ActionResult(
        action_execution_id=call_id, action_name=name, result=value, is_error=is_error
    )


# --- fixtures ---------------------------------------------------------------------------------

TEXT_ONLY: list[Any] = [
    generation_start(temperature=0.2, max_tokens=100),  # 1
    *text("m1", "Hel", "lo"),  # 2..5: the first chunk at 3
    generation_end(
        input_tokens=12, output_tokens=2, cached_input_tokens=4, cache_write_input_tokens=3
    ),  # 6
    RunFinished(status="succeeded"),  # 7
]

# The model calls two server actions at once; the second returns first, the first fails.
PARALLEL_TOOLS: list[Any] = [
    generation_start(tools=2),  # 1
    ActionStart(action_execution_id="call-a", action_name="lookup"),  # 2
    ActionArgs(action_execution_id="call-a", delta='{"city": '),  # 3
    ActionStart(action_execution_id="call-b", action_name="weather"),  # 4
    ActionArgs(action_execution_id="call-a", delta='"Lisbon"}'),  # 5
    ActionArgs(action_execution_id="call-b", delta='{"day": 1}'),  # 6
    ActionEnd(action_execution_id="call-a"),  # 7
    ActionEnd(action_execution_id="call-b"),  # 8
    generation_end("tool_calls"),  # 9
    result("call-b", "weather", '{"sunny": true}'),  # 10
    result("call-a", "lookup", '{"error": {"code": "X"}}', is_error=True),  # 11
    generation_start(),  # 12
    *text("m2", "Done."),  # 13..15
    generation_end(),  # 16
    RunFinished(status="succeeded"),  # 17
]

TOOL_ERROR: list[Any] = [
    generation_start(),  # 1
    *tool_call("call-x", "explode", "{}"),  # 2..4
    generation_end("tool_calls"),  # 5
    result("call-x", "explode", "boom", is_error=True),  # 6
    RunFinished(status="succeeded"),  # 7
]

# Stopped while the server action executes: its result never comes.
CUT_DURING_TOOL: list[Any] = [
    generation_start(),  # 1
    *tool_call("call-slow", "slow", '{"n": 1}'),  # 2..4
    generation_end("tool_calls"),  # 5
    RunFinished(status="cancelled"),  # 6
]

# The stream stops while the model is still writing a call's arguments, and the run's end is
# never observed (the process executing it stopped).
CUT_DURING_ARGUMENTS: list[Any] = [
    generation_start(),  # 1
    ActionStart(action_execution_id="call-half", action_name="half"),  # 2
    ActionArgs(action_execution_id="call-half", delta='{"a": '),  # 3
]

REASONING: list[Any] = [
    generation_start(),  # 1
    ReasoningStart(message_id="r1"),  # 2
    ReasoningDelta(message_id="r1", delta="Think "),  # 3
    ReasoningDelta(message_id="r1", delta="hard."),  # 4
    ReasoningEnd(message_id="r1"),  # 5
    *text("m1", "42"),  # 6..8
    generation_end(output_tokens=30, reasoning_tokens=25),  # 9
    RunFinished(status="succeeded"),  # 10
]

REASONING_CUT: list[Any] = [
    generation_start(),  # 1
    ReasoningStart(message_id="r1"),  # 2
    ReasoningDelta(message_id="r1", delta="Half a thou"),  # 3
    RunFinished(status="cancelled"),  # 4
]

UPSTREAM_FAILURE: list[Any] = [
    generation_start(),  # 1
    *text("m1", "par"),  # 2..4
    GenerationEnd(model=MODEL, finish_reason="error"),  # 5
    RunError(message="The model service failed.", code="UPSTREAM_SERVER_ERROR"),  # 6
    RunFinished(status="failed"),  # 7
]

GUARDRAIL_DENIED: list[Any] = [
    GuardrailResult(name="no politics", status="denied", reason="politics"),  # 1
    RunError(message="politics", code="GUARDRAILS_VALIDATION_FAILED"),  # 2
    RunFinished(status="failed"),  # 3
]

# A classifier on the model checked the input (500 ms), and allowed it; then the turn ran.
GUARDRAIL_CLASSIFIED: list[Any] = [
    GuardrailDecisionEvent(
        denied=False,
        mode="blocking",
        evaluators="model",
        rules=2,
        latency_ms=500,
        model=MODEL,
        input_tokens=40,
        output_tokens=3,
    ),  # 1
    generation_start(),  # 2
    *text("m1", "Sure."),  # 3..5
    generation_end(),  # 6
    RunFinished(status="succeeded"),  # 7
]

# An approved call from an earlier run is executed first, then the model answers.
APPROVED_CALL: list[Any] = [
    result("call-old", "delete_file", "deleted"),  # 1
    generation_start(),  # 2
    *text("m1", "Deleted."),  # 3..5
    generation_end(),  # 6
    RunFinished(status="succeeded"),  # 7
]

WITH_STATE_LIMITS_AND_INTERRUPT: list[Any] = [
    generation_start(),  # 1
    generation_end(),  # 2
    AgentStateSnapshot(thread_id="t1", agent_name="default", state={"todos": []}),  # 3
    LimitTrip(kind="max_iterations", message="too many"),  # 4
    MetaEvent(name="LangGraphInterruptEvent", value="approve?"),  # 5
    RunFinished(status="interrupted"),  # 6
]


def derive_spans(
    events: Sequence[Any],
    root: RunSpanSpec,
    *,
    times: Sequence[float] | None = None,
    end_at: float | None = None,
    capture_content: bool = False,
) -> list[Signal]:
    """Every signal of a whole stream (start, each event, flush), as the tracer derives them
    during a run. Event ``i`` happens at
    ``times[i]`` (default: ``i + 1``); the run starts at 0 and ends at ``end_at`` (default:
    one after the last event)."""
    at = list(times) if times is not None else [float(i + 1) for i in range(len(events))]
    deriver = SpanDeriver(root, capture_content=capture_content)
    signals = deriver.start(0.0)
    for event, when in zip(events, at, strict=True):
        signals.extend(deriver.observe(event, when))
    signals.extend(deriver.flush(end_at if end_at is not None else (at[-1] + 1 if at else 1.0)))
    return signals
