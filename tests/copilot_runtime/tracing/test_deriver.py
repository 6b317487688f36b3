"""The span deriver: fixtures of whole runs' event streams and the spans they give."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from copilot_runtime.events import RunFinished, TextDelta, event_from_payload
from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing.deriver import SpanDeriver
from copilot_runtime.tracing.signals import (
    Signal,
    SpanAnnotated,
    SpanClosed,
    SpanOpened,
)
from copilot_runtime.tracing.span_tree import ROOT_KEY, RunSpanSpec
from tests.copilot_runtime.tracing import fixtures as fx

ROOT = RunSpanSpec(
    run_id="run-1", thread_id="thread-1", agent_name="default", model=fx.MODEL, provider="openai"
)


@dataclass
class DerivedSpan:
    key: str
    kind: str
    name: str
    parent: str | None
    start: float
    end: float | None = None
    input: Any = None
    output: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)
    is_error: bool | None = None
    is_complete: bool | None = None
    closes: int = 0


def fold(signals: list[Signal]) -> dict[str, DerivedSpan]:
    """The spans the signals describe, by key, in opening order; a span opened twice or closed
    twice is a deriver bug, so it fails here."""
    spans: dict[str, DerivedSpan] = {}
    for signal in signals:
        if isinstance(signal, SpanOpened):
            assert signal.key not in spans, f"{signal.key} opened twice"
            if signal.parent_key is not None:
                assert signal.parent_key in spans, f"{signal.key}: unknown parent"
            spans[signal.key] = DerivedSpan(
                key=signal.key,
                kind=signal.kind,
                name=signal.name,
                parent=signal.parent_key,
                start=signal.at,
                input=signal.input,
                attributes=dict(signal.attributes),
            )
        elif isinstance(signal, SpanClosed):
            span = spans[signal.key]
            span.closes += 1
            assert span.closes == 1, f"{signal.key} closed twice"
            span.end = signal.at
            span.output = signal.output
            span.attributes.update(signal.attributes)
            span.is_error = signal.is_error
            span.is_complete = signal.is_complete
        elif isinstance(signal, SpanAnnotated):
            span = spans[signal.key]
            span.attributes.update(signal.attributes)
            if signal.is_error is not None:
                span.is_error = signal.is_error
    for span in spans.values():
        assert span.closes == 1, f"{span.key} never closed"
    return spans


def derive(events: list[Any], **options: Any) -> dict[str, DerivedSpan]:
    return fold(fx.derive_spans(events, ROOT, **options))


def shape(spans: dict[str, DerivedSpan]) -> list[tuple[Any, ...]]:
    return [
        (s.key, s.kind, s.name, s.parent, s.start, s.end, s.is_error, s.is_complete)
        for s in spans.values()
    ]


def test_a_text_answer_is_a_run_with_one_generation() -> None:
    spans = derive(fx.TEXT_ONLY)

    assert shape(spans) == [
        ("run", "run", "invoke_agent default", None, 0.0, 8.0, False, True),
        ("generation:1", "generation", "chat gpt-4o-mini", "run", 1.0, 6.0, None, True),
    ]
    generation = spans["generation:1"].attributes
    assert generation == {
        attr.OPERATION_NAME: "chat",
        attr.REQUEST_MODEL: "gpt-4o-mini",
        attr.CONVERSATION_ID: "thread-1",
        attr.PROVIDER_NAME: "openai",
        attr.REQUEST_TEMPERATURE: 0.2,
        attr.REQUEST_MAX_TOKENS: 100,
        attr.RESPONSE_TIME_TO_FIRST_CHUNK: 2.0,
        attr.RESPONSE_MODEL: "gpt-4o-mini",
        attr.RESPONSE_FINISH_REASONS: ["stop"],
        attr.USAGE_INPUT_TOKENS: 12,
        attr.USAGE_OUTPUT_TOKENS: 2,
        attr.USAGE_CACHE_READ_INPUT_TOKENS: 4,
        attr.USAGE_CACHE_CREATION_INPUT_TOKENS: 3,
        attr.USAGE_REASONING_OUTPUT_TOKENS: 0,
    }
    run = spans["run"].attributes
    assert run[attr.OPERATION_NAME] == "invoke_agent"
    assert run[attr.AGENT_NAME] == "default"
    assert run[attr.CONVERSATION_ID] == "thread-1"
    assert run[attr.RUN_ID] == "run-1"
    assert run[attr.RUN_STATUS] == "succeeded"
    assert (run[attr.USAGE_INPUT_TOKENS], run[attr.USAGE_OUTPUT_TOKENS]) == (12, 2)
    assert run[attr.USAGE_CACHE_CREATION_INPUT_TOKENS] == 3
    assert (run[attr.GENERATIONS], run[attr.TOOL_CALLS]) == (1, 0)


def test_parallel_tool_calls_open_when_their_arguments_end_and_close_at_their_own_result() -> None:
    spans = derive(fx.PARALLEL_TOOLS)

    assert shape(spans) == [
        ("run", "run", "invoke_agent default", None, 0.0, 18.0, False, True),
        ("generation:1", "generation", "chat gpt-4o-mini", "run", 1.0, 9.0, None, True),
        ("tool:call-a", "tool", "execute_tool lookup", "run", 7.0, 11.0, True, True),
        ("tool:call-b", "tool", "execute_tool weather", "run", 8.0, 10.0, False, True),
        ("generation:2", "generation", "chat gpt-4o-mini", "run", 12.0, 16.0, None, True),
    ]
    # The first chunk of the first call is its first tool call event.
    assert spans["generation:1"].attributes[attr.RESPONSE_TIME_TO_FIRST_CHUNK] == 1.0
    assert spans["generation:1"].attributes[attr.RESPONSE_FINISH_REASONS] == ["tool_calls"]
    assert spans["generation:1"].attributes[attr.REQUEST_TOOLS_COUNT] == 2
    assert spans["tool:call-a"].attributes == {
        attr.OPERATION_NAME: "execute_tool",
        attr.TOOL_NAME: "lookup",
        attr.TOOL_CALL_ID: "call-a",
        attr.TOOL_TYPE: "function",
        attr.ERROR_TYPE: "tool_error",
    }
    assert attr.ERROR_TYPE not in spans["tool:call-b"].attributes
    assert spans["run"].attributes[attr.TOOL_CALLS] == 2
    assert spans["run"].attributes[attr.GENERATIONS] == 2
    # Content is off by default: no arguments, results or text anywhere.
    assert all(s.input is None and s.output is None for s in spans.values())


def test_a_tool_that_errors_is_marked_and_the_run_is_not() -> None:
    spans = derive(fx.TOOL_ERROR)

    tool = spans["tool:call-x"]
    assert (tool.start, tool.end, tool.is_error, tool.is_complete) == (4.0, 6.0, True, True)
    assert spans["run"].is_error is False


def test_a_run_stopped_during_a_tool_closes_the_tool_as_incomplete() -> None:
    spans = derive(fx.CUT_DURING_TOOL)

    tool = spans["tool:call-slow"]
    assert (tool.start, tool.end, tool.is_error, tool.is_complete) == (4.0, 7.0, None, False)
    assert tool.attributes[attr.CLOSED_BY] == "run_end"
    run = spans["run"]
    assert (run.is_complete, run.is_error) == (True, False)
    assert run.attributes[attr.RUN_STATUS] == "cancelled"


def test_a_stream_cut_during_arguments_has_no_tool_span_and_everything_incomplete() -> None:
    spans = derive(fx.CUT_DURING_ARGUMENTS)

    assert shape(spans) == [
        ("run", "run", "invoke_agent default", None, 0.0, 4.0, False, False),
        ("generation:1", "generation", "chat gpt-4o-mini", "run", 1.0, 4.0, None, False),
    ]
    assert attr.RUN_STATUS not in spans["run"].attributes
    assert attr.USAGE_INPUT_TOKENS not in spans["generation:1"].attributes
    assert spans["generation:1"].attributes[attr.RESPONSE_TIME_TO_FIRST_CHUNK] == 1.0


def test_reasoning_is_a_span_inside_its_model_call() -> None:
    spans = derive(fx.REASONING, capture_content=True)

    reasoning = spans["reasoning:r1"]
    assert (reasoning.kind, reasoning.parent, reasoning.start, reasoning.end) == (
        "reasoning",
        "generation:1",
        2.0,
        5.0,
    )
    assert reasoning.output == {"text": "Think hard."}
    generation = spans["generation:1"].attributes
    assert generation[attr.USAGE_REASONING_OUTPUT_TOKENS] == 25
    assert generation[attr.RESPONSE_TIME_TO_FIRST_CHUNK] == 1.0
    assert spans["run"].attributes[attr.USAGE_REASONING_OUTPUT_TOKENS] == 25


def test_reasoning_cut_short_keeps_what_was_thought() -> None:
    spans = derive(fx.REASONING_CUT, capture_content=True)

    reasoning = spans["reasoning:r1"]
    assert (reasoning.end, reasoning.is_complete) == (5.0, False)
    assert reasoning.output == {"text": "Half a thou"}
    assert spans["generation:1"].is_complete is False


def test_flush_closes_tools_then_reasoning_then_the_call_then_the_run() -> None:
    deriver = SpanDeriver(ROOT)
    deriver.start(0.0)
    for index, event in enumerate(
        [
            fx.generation_start(),
            *fx.tool_call("t2", "second"),
            *fx.tool_call("t1", "first"),
            fx.ReasoningStart(message_id="r"),
        ]
    ):
        deriver.observe(event, float(index + 1))

    closed = [s.key for s in deriver.flush(99.0) if isinstance(s, SpanClosed)]

    assert closed == ["tool:t2", "tool:t1", "reasoning:r", "generation:1", ROOT_KEY]
    assert deriver.flush(100.0) == []
    assert deriver.observe(fx.generation_start(), 101.0) == ()


def test_a_failed_model_call_carries_the_error_that_followed_it() -> None:
    spans = derive(fx.UPSTREAM_FAILURE)

    generation = spans["generation:1"]
    assert (generation.is_error, generation.is_complete) == (True, True)
    assert generation.attributes[attr.ERROR_TYPE] == "UPSTREAM_SERVER_ERROR"
    assert generation.attributes[attr.ERROR_MESSAGE] == "The model service failed."
    assert generation.attributes[attr.RESPONSE_FINISH_REASONS] == ["error"]
    run = spans["run"]
    assert run.is_error is True
    assert run.attributes[attr.ERROR_TYPE] == "UPSTREAM_SERVER_ERROR"
    assert run.attributes[attr.RUN_STATUS] == "failed"


def test_a_guardrail_decision_is_a_span_of_no_duration() -> None:
    spans = derive(fx.GUARDRAIL_DENIED)

    (guardrail,) = [s for s in spans.values() if s.kind == "guardrail"]
    assert (guardrail.name, guardrail.parent, guardrail.start, guardrail.end) == (
        "guardrail no politics",
        "run",
        1.0,
        1.0,
    )
    assert guardrail.is_error is True
    assert guardrail.attributes["copilot.guardrail.reason"] == "politics"
    assert guardrail.attributes["copilot.guardrail.triggered"] is True
    assert spans["run"].attributes[attr.ERROR_TYPE] == "GUARDRAILS_VALIDATION_FAILED"


def test_a_guardrail_decision_lasts_its_latency_and_counts_its_classifier_usage() -> None:
    spans = derive(fx.GUARDRAIL_CLASSIFIED)

    guardrail = spans["guardrail:1"]
    assert (guardrail.kind, guardrail.name, guardrail.parent) == (
        "guardrail",
        "guardrail input",
        "run",
    )
    assert (guardrail.start, guardrail.end, guardrail.is_error) == (0.5, 1.0, False)
    assert guardrail.attributes[attr.REQUEST_MODEL] == fx.MODEL
    assert guardrail.attributes[attr.USAGE_INPUT_TOKENS] == 40
    assert guardrail.attributes["copilot.guardrail.evaluators"] == "model"
    assert guardrail.attributes["copilot.guardrail.rules"] == 2
    # The run's usage is the model call's and the classifier's.
    assert spans["run"].attributes[attr.USAGE_INPUT_TOKENS] == 50
    assert spans["run"].attributes[attr.USAGE_OUTPUT_TOKENS] == 8


def test_a_denying_guardrail_decision_is_an_error_span() -> None:
    spans = derive(
        [
            fx.GuardrailDecisionEvent(denied=True, reason="politics", evaluators="local"),
            fx.RunError(message="politics", code="GUARDRAILS_VALIDATION_FAILED"),
            fx.RunFinished(status="failed"),
        ]
    )

    guardrail = spans["guardrail:1"]
    assert (guardrail.start, guardrail.end, guardrail.is_error) == (1.0, 1.0, True)
    assert guardrail.attributes[attr.ERROR_TYPE] == "guardrail_denied"
    assert guardrail.attributes["copilot.guardrail.reason"] == "politics"
    assert attr.USAGE_INPUT_TOKENS not in guardrail.attributes  # no classifier call
    assert spans["run"].attributes[attr.ERROR_TYPE] == "GUARDRAILS_VALIDATION_FAILED"


def test_an_allowed_guardrail_decision_is_not_an_error() -> None:
    spans = derive([fx.GuardrailResult(name="topics", status="allowed")])

    (guardrail,) = [s for s in spans.values() if s.kind == "guardrail"]
    assert guardrail.is_error is False


def test_a_result_of_a_call_from_an_earlier_run_is_a_point_span() -> None:
    spans = derive(fx.APPROVED_CALL)

    tool = spans["tool:call-old"]
    assert (tool.start, tool.end, tool.is_error, tool.parent) == (1.0, 1.0, False, "run")
    assert tool.attributes["copilot.tool.resumed"] is True
    assert spans["run"].attributes[attr.TOOL_CALLS] == 1


def test_state_snapshots_limit_trips_and_interrupts_are_counted_on_the_run() -> None:
    spans = derive(fx.WITH_STATE_LIMITS_AND_INTERRUPT)

    run = spans["run"].attributes
    assert run[attr.STATE_SNAPSHOTS] == 1
    assert run[attr.LIMIT_TRIPS] == ["max_iterations"]
    assert run[attr.INTERRUPTS] == ["LangGraphInterruptEvent"]
    assert run[attr.RUN_STATUS] == "interrupted"
    assert spans["run"].is_error is False


def test_content_capture_keeps_arguments_results_text_and_the_run_input() -> None:
    root = RunSpanSpec(run_id="r", thread_id="t", agent_name="default", input={"messages": []})
    spans = fold(fx.derive_spans(fx.PARALLEL_TOOLS, root, capture_content=True))

    assert spans["run"].input == {"messages": []}
    assert spans["tool:call-a"].input == {"city": "Lisbon"}
    assert spans["tool:call-a"].output == {"error": {"code": "X"}}
    assert spans["tool:call-b"].input == {"day": 1}
    assert spans["tool:call-b"].output == {"sunny": True}
    assert spans["generation:1"].output == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call-a", "name": "lookup", "arguments": {"city": "Lisbon"}},
            {"id": "call-b", "name": "weather", "arguments": {"day": 1}},
        ],
    }
    assert spans["generation:2"].output == {"role": "assistant", "content": "Done."}


def test_content_capture_keeps_unparseable_arguments_and_plain_results() -> None:
    events = [
        fx.generation_start(),
        *fx.tool_call("c", "f", "{not json"),
        fx.generation_end("tool_calls"),
        fx.result("c", "f", "plain words"),
    ]
    spans = derive(events, capture_content=True)

    assert spans["tool:c"].input == {"_raw": "{not json"}
    assert spans["tool:c"].output == {"text": "plain words"}


def test_root_input_is_dropped_without_content_capture() -> None:
    root = RunSpanSpec(run_id="r", thread_id="t", agent_name="default", input={"secret": 1})
    spans = fold(fx.derive_spans(fx.TEXT_ONLY, root))

    assert spans["run"].input is None


def test_an_agent_run_has_an_agent_root_span() -> None:
    root = RunSpanSpec(run_id="r", thread_id="t", agent_name="travel", kind="agent")
    spans = fold(fx.derive_spans(fx.TEXT_ONLY, root))

    assert (spans["run"].kind, spans["run"].name) == ("agent", "invoke_agent travel")
    assert spans["run"].attributes[attr.AGENT_NAME] == "travel"


def test_a_model_call_without_an_end_is_closed_when_the_next_one_starts() -> None:
    spans = derive([fx.generation_start(), fx.generation_start(), fx.generation_end()])

    assert (spans["generation:1"].end, spans["generation:1"].is_complete) == (2.0, False)
    assert (spans["generation:2"].end, spans["generation:2"].is_complete) == (3.0, True)


def test_unknown_events_and_stray_ends_are_ignored() -> None:
    @dataclass
    class Mystery:
        type: ClassVar[str] = "mystery"

    events = [
        Mystery(),
        fx.ActionEnd(action_execution_id="never-started"),
        fx.generation_end(),  # no call is open
        fx.ReasoningEnd(message_id="never-started"),
        TextDelta(message_id="m", delta="outside any call"),
        RunFinished(status="succeeded"),
    ]
    spans = derive(events)

    assert list(spans) == ["run"]


@pytest.mark.parametrize(
    "fixture",
    [
        fx.TEXT_ONLY,
        fx.PARALLEL_TOOLS,
        fx.TOOL_ERROR,
        fx.CUT_DURING_TOOL,
        fx.UPSTREAM_FAILURE,
        fx.WITH_STATE_LIMITS_AND_INTERRUPT,
    ],
)
def test_a_stored_event_log_gives_the_same_spans_as_the_live_stream(fixture: list[Any]) -> None:
    """The run's log (payloads, deltas coalesced) replays to the same span tree."""
    replayed = [event_from_payload(e.type, e.to_payload()) for e in fixture]

    assert shape(derive(replayed)) == shape(derive(fixture))


def test_every_open_span_is_closed_exactly_once_in_every_fixture() -> None:
    for name in dir(fx):
        value = getattr(fx, name)
        if name.isupper() and isinstance(value, list):
            fold(fx.derive_spans(value, ROOT))  # asserts one open and one close per span
