"""Tracing end to end: the real CopilotKit client drives a turn with a server action, and the
served process stores (and exports over OTLP) the expected span tree, usage and cost."""

from __future__ import annotations

import html
import importlib
import json
import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import reverse

from conversations.models import RunStatus, Span, TraceBlob
from copilot_runtime.models import ModelPrice
from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing.records import trace_id_for_run
from tests.copilot_runtime.tracing.test_exporter import Collector
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    finished_run,
    generate_command,
    generate_data,
    server_env,
    text_input,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

ADD_THEN_ANSWER = (
    {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 2, "b": 40}, "fragments": 3}]},
    {"text": "The sum is 42."},
)


def _spans(run_id: str, count: int) -> list[Span]:
    def probe() -> list[Span] | None:
        rows = list(Span.objects.filter(run_id=run_id).order_by("started_at", "id"))
        return rows if len(rows) >= count else None

    return wait_for(probe, what=f"{count} spans of run {run_id}")


def test_a_traced_turn_with_a_server_action(
    live_server_factory: Any, fake_upstream: FakeUpstream, admin_client: Client
) -> None:
    ModelPrice.objects.create(
        model="gpt-4o-mini",
        input_per_million=Decimal("0.15"),
        cached_input_per_million=Decimal("0.075"),
        output_per_million=Decimal("0.60"),
    )
    server = live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_TRACE_CONTENT="true")
    )
    fake_upstream.script(*ADD_THEN_ANSWER)
    data = generate_data(thread_id="traced-e2e", messages=[text_input("u1", "What is 2 + 40?")])

    result = run_js(JS_CLIENT_VERSIONS[0], generate_command(server.url, data))

    assert result["errors"] == []
    run = finished_run(result["final"]["runId"])
    assert run.status == RunStatus.SUCCEEDED
    spans = _spans(run.pk, 4)
    run.refresh_from_db()  # the cost is written with the spans, just after the run's end
    assert [(s.kind, s.name) for s in spans] == [
        ("run", "invoke_agent default"),
        ("generation", "chat gpt-4o-mini"),
        ("tool", "execute_tool serverAdd"),
        ("generation", "chat gpt-4o-mini"),
    ]
    root, first_call, tool, second_call = spans
    assert {s.trace_id for s in spans} == {trace_id_for_run(run.pk)}
    assert all(s.parent_span_id == root.span_id for s in spans[1:])
    assert all(s.is_complete for s in spans)
    # The tool span: the call's id, its arguments and result (content capture is on).
    assert tool.attributes[attr.TOOL_CALL_ID] == result["final"]["messages"][0]["id"]
    assert (tool.input, tool.output, tool.is_error) == ({"a": 2, "b": 40}, {"sum": 42}, False)
    assert second_call.output == {"role": "assistant", "content": "The sum is 42."}
    # Content by reference: the stored message sent, then what the run added before a call.
    assert root.input == {"history": {"first": "u1", "last": "u1", "count": 1}}
    assert first_call.input["history"] == second_call.input["history"] == root.input["history"]
    assert (first_call.input["in_run"], second_call.input["in_run"]) == (0, 2)
    assert first_call.input["tools"] == second_call.input["tools"]
    tools = TraceBlob.objects.get(sha256=first_call.input["tools"]).content
    assert "serverAdd" in json.dumps(tools)
    # The inspector rebuilds the second call's whole prompt from those references.
    page = admin_client.get(
        reverse("admin:conversations_thread_inspect", args=[run.thread_id]), {"run": run.pk}
    ).content.decode()
    calls_shown = re.findall(r'data-kind="generation">(.*?)</details>', page, re.S)
    prompt = calls_shown[1]
    texts = re.findall(r'<pre class="ins-json">(.*?)</pre>', prompt, re.S)
    shown = [html.unescape(text) for text in texts]
    assert shown[0] == "What is 2 + 40?"
    assert shown[1].startswith("calls serverAdd(") and '"sum": 42' in shown[2]
    # Usage per call adds up to the run's; the cost is priced per call and summed.
    calls = [first_call.attributes, second_call.attributes]
    assert sum(c[attr.USAGE_INPUT_TOKENS] for c in calls) == run.input_tokens
    assert sum(c[attr.USAGE_OUTPUT_TOKENS] for c in calls) == run.output_tokens
    assert [c[attr.RESPONSE_FINISH_REASONS] for c in calls] == [["tool_calls"], ["stop"]]
    expected = (run.input_tokens * Decimal("0.15") + run.output_tokens * Decimal("0.60")) / 10**6
    assert run.cost is not None and abs(run.cost - expected) < Decimal("1e-9")
    assert root.attributes[attr.USAGE_COST] == pytest.approx(float(expected))
    assert root.attributes[attr.CONVERSATION_ID] == "traced-e2e"
    assert root.attributes[attr.RUN_STATUS] == "succeeded"
    # One clock: the run's start, end and duration are its run span's.
    assert (run.started_at, run.finished_at) == (root.started_at, root.ended_at)


def test_a_served_process_exports_its_spans_over_otlp(
    live_server_factory: Any, fake_upstream: FakeUpstream
) -> None:
    # The suite installs the otel extra (scripts/test.sh): a missing exporter is a failure.
    importlib.import_module("opentelemetry.exporter.otlp.proto.http")
    collector = Collector()
    collector.thread.start()
    try:
        server = live_server_factory(
            env=server_env(
                fake_upstream.base_url,
                OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
                OTEL_BSP_SCHEDULE_DELAY="50",
                OTEL_SERVICE_NAME="copilot-e2e",
                COPILOT_RUNTIME_TRACE_CONTENT="false",
            )
        )
        fake_upstream.script(*ADD_THEN_ANSWER)
        data = generate_data(thread_id="otlp-e2e", messages=[text_input("u1", "Add them")])

        result = run_js(JS_CLIENT_VERSIONS[0], generate_command(server.url, data))

        run_id = result["final"]["runId"]
        stored = _spans(run_id, 4)
        exported = wait_for(
            lambda: collector.spans() if len(collector.spans()) >= 4 else None,
            what="4 spans at the collector",
        )
    finally:
        collector.server.shutdown()
        collector.server.server_close()

    assert {s.span_id.hex() for s in exported} == {s.span_id for s in stored}
    assert {s.trace_id.hex() for s in exported} == {trace_id_for_run(run_id)}
    names = sorted(s.name for s in exported)
    assert names == sorted(s.name for s in stored)
    # With content off, nothing of the conversation leaves the process.
    for span in exported:
        for item in span.attributes:
            assert item.key not in (attr.TOOL_CALL_ARGUMENTS, attr.TOOL_CALL_RESULT)
            assert "Add them" not in json.dumps(str(item.value))
