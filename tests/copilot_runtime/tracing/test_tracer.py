"""The run tracer: spans and cost stored at the end of a run, and never an exception."""

from __future__ import annotations

import itertools
import logging
from decimal import Decimal
from typing import Any

import pytest
from django.test import override_settings

from conversations.models import Run, Span
from conversations.store import spans as store_module
from copilot_runtime.events.request import InputMessage, TurnRequest
from copilot_runtime.models import ModelPrice
from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing import tracer as tracer_module
from copilot_runtime.tracing.records import trace_id_for_run
from copilot_runtime.tracing.span_tree import RunSpanSpec
from copilot_runtime.tracing.tracer import RunTracer
from tests.conversations.factories import run_row, thread_create
from tests.copilot_runtime.tracing import fixtures as fx

pytestmark = pytest.mark.django_db(transaction=True)


class RecordingExport:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []

    def export(self, *, trace_id: str, records: Any) -> None:
        self.calls.append((trace_id, list(records)))


def _tracer(run_id: str, **options: Any) -> RunTracer:
    clock = itertools.count(1_700_000_000)
    return RunTracer(
        run_id=run_id,
        spec=RunSpanSpec(run_id=run_id, thread_id="thread-t", agent_name="default"),
        clock=lambda: float(next(clock)),
        **options,
    )


async def _trace(run_id: str, events: list[Any], **options: Any) -> RunTracer:
    tracer = _tracer(run_id, **options)
    for event in events:
        tracer.observe(event)
    await tracer.finish()
    return tracer


@pytest.fixture
def run() -> Run:
    return run_row(thread=thread_create(thread_id="thread-t"), status="succeeded", run_id="run-t")


async def test_the_spans_of_a_run_are_stored_as_a_tree(run: Run) -> None:
    await _trace(run.pk, fx.PARALLEL_TOOLS)

    rows = [s async for s in Span.objects.filter(run_id=run.pk).order_by("started_at", "id")]
    by_name = {s.name: s for s in rows}
    root = by_name["invoke_agent default"]
    assert len(rows) == 5
    assert {s.trace_id for s in rows} == {trace_id_for_run(run.pk)}
    assert len({s.span_id for s in rows}) == 5
    assert all(len(s.span_id) == 16 and len(s.trace_id) == 32 for s in rows)
    assert root.parent_span_id == ""
    assert {s.parent_span_id for s in rows if s is not root} == {root.span_id}
    assert [s.kind for s in rows] == ["run", "generation", "tool", "tool", "generation"]
    lookup = by_name["execute_tool lookup"]
    assert (lookup.is_error, lookup.is_complete) == (True, True)
    assert (lookup.ended_at - lookup.started_at).total_seconds() == 4.0
    assert by_name["execute_tool weather"].is_error is False
    assert root.attributes[attr.TOOL_CALLS] == 2
    assert root.ended_at is not None
    # The run's times are its run span's (one clock for both durations).
    await run.arefresh_from_db()
    assert (run.started_at, run.finished_at) == (root.started_at, root.ended_at)


async def test_cost_is_stored_on_the_run_and_its_generation_spans(run: Run) -> None:
    await ModelPrice.objects.acreate(
        model="gpt-4o-mini", input_per_million="1", output_per_million="2"
    )

    tracer = await _trace(run.pk, fx.PARALLEL_TOOLS)

    # Two calls of 10 input and 5 output tokens each.
    expected = Decimal("0.00004")
    assert tracer.cost == expected
    stored = await Run.objects.aget(pk=run.pk)
    assert stored.cost == expected
    costs = [
        s.attributes.get(attr.USAGE_COST)
        async for s in Span.objects.filter(run_id=run.pk, kind="generation")
    ]
    assert costs == [pytest.approx(0.00002), pytest.approx(0.00002)]


async def test_an_unpriced_model_leaves_the_run_cost_empty(run: Run) -> None:
    await _trace(run.pk, fx.TEXT_ONLY)

    assert (await Run.objects.aget(pk=run.pk)).cost is None


async def test_with_tracing_off_no_span_is_stored_but_the_cost_is(run: Run) -> None:
    await ModelPrice.objects.acreate(
        model="gpt-4o-mini", input_per_million="1", output_per_million="1"
    )

    await _trace(run.pk, fx.TEXT_ONLY, persist_spans=False)

    assert await Span.objects.filter(run_id=run.pk).acount() == 0
    assert (await Run.objects.aget(pk=run.pk)).cost == Decimal("0.000014")


async def test_the_export_gets_the_same_spans(run: Run) -> None:
    export = RecordingExport()

    tracer = await _trace(run.pk, fx.TOOL_ERROR, export=export)

    ((trace_id, records),) = export.calls
    assert trace_id == tracer.trace_id
    stored = {s.span_id async for s in Span.objects.filter(run_id=run.pk)}
    assert {r.span_id for r in records} == stored


async def test_a_failing_store_is_logged_and_never_raised(
    run: Run, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**_: Any) -> None:
        raise RuntimeError("database on fire")

    monkeypatch.setattr(store_module, "spans_store", broken)
    with caplog.at_level(logging.WARNING, logger="copilot_runtime.tracing.tracer"):
        await _trace(run.pk, fx.TEXT_ONLY)

    assert "tracing run run-t failed while storing spans" in caplog.text
    assert await Span.objects.filter(run_id=run.pk).acount() == 0


async def test_a_failing_deriver_switches_tracing_off_for_the_run(
    run: Run, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        type = "generation_start"  # the rule reads fields this event does not have

    tracer = _tracer(run.pk)
    with caplog.at_level(logging.WARNING, logger="copilot_runtime.tracing.tracer"):
        tracer.observe(Broken())
        for event in fx.TEXT_ONLY:
            tracer.observe(event)  # ignored from now on, and never raising
        await tracer.finish()

    assert caplog.text.count("failed while deriving spans") == 1
    assert await Span.objects.filter(run_id=run.pk).acount() == 0


async def test_a_tracer_that_cannot_even_start_does_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(key: str) -> Any:
        raise KeyError(key)

    monkeypatch.setattr(tracer_module, "runtime_setting", broken)
    tracer = RunTracer.for_run(
        run_id="run-x", thread_id="t", request=TurnRequest(thread_id="t", messages=[]), model="m"
    )
    tracer.observe(fx.generation_start())
    await tracer.finish()

    assert await Span.objects.acount() == 0


def _request(agent_name: str = "default") -> TurnRequest:
    return TurnRequest(
        thread_id="thread-t",
        agent_name=agent_name,
        messages=[
            InputMessage(id="u1", kind="text", role="user", content="My secret question"),
            InputMessage(id="a1", kind="action_execution", action_name="f", arguments={"x": 1}),
            InputMessage(id="r1", kind="result", action_execution_id="a1", result="42"),
        ],
    )


async def test_content_is_not_stored_with_the_setting_off(run: Run) -> None:
    with override_settings(COPILOT_RUNTIME={"TRACE_CONTENT": False}):
        tracer = RunTracer.for_run(
            run_id=run.pk, thread_id="thread-t", request=_request(), model="m"
        )
    for event in fx.PARALLEL_TOOLS:
        tracer.observe(event)
    await tracer.finish()

    async for span in Span.objects.filter(run_id=run.pk):
        assert (span.input, span.output) == (None, None), span.name
    root = await Span.objects.aget(run_id=run.pk, parent_span_id="")
    assert root.attributes[attr.REQUEST_MODEL] == "m"


async def test_content_is_stored_when_the_setting_says_so(run: Run) -> None:
    with override_settings(COPILOT_RUNTIME={"TRACE_CONTENT": True}):
        tracer = RunTracer.for_run(
            run_id=run.pk, thread_id="thread-t", request=_request(), model="m", provider="openai"
        )
    for event in fx.PARALLEL_TOOLS:
        tracer.observe(event)
    await tracer.finish()

    root = await Span.objects.aget(run_id=run.pk, parent_span_id="")
    # The run span refers to the stored messages it was sent, never copies them.
    assert root.input == {"history": {"first": "u1", "last": "r1", "count": 3}}
    assert root.attributes[attr.PROVIDER_NAME] == "openai"
    tool = await Span.objects.aget(run_id=run.pk, name="execute_tool weather")
    assert (tool.input, tool.output) == ({"day": 1}, {"sunny": True})


async def test_an_agent_run_is_traced_under_an_agent_span(run: Run) -> None:
    tracer = RunTracer.for_run(
        run_id=run.pk, thread_id="thread-t", request=_request("travel"), model="m"
    )
    tracer.observe(fx.RunFinished(status="succeeded"))
    await tracer.finish()

    root = await Span.objects.aget(run_id=run.pk)
    assert (root.kind, root.name) == ("agent", "invoke_agent travel")
