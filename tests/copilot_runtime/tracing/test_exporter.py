"""The optional OTLP/HTTP export, against a loopback stand-in of a collector."""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from copilot_runtime.tracing import exporter as exporter_module
from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing.exporter import (
    otlp_attributes,
    otlp_export_create,
    otlp_export_from_environment,
)
from copilot_runtime.tracing.records import SpanBook, SpanRecord, trace_id_for_run
from copilot_runtime.tracing.span_tree import RunSpanSpec
from tests.copilot_runtime.tracing import fixtures as fx
from tests.copilot_runtime.tracing.fixtures import derive_spans


class Collector:
    """An OTLP/HTTP endpoint on loopback that keeps the bodies it receives."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received.paths.append(self.path)
                received.bodies.append(self.rfile.read(length))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[Any]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        found = []
        for body in self.bodies:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    found.extend(scope_spans.spans)
        return found


@pytest.fixture
def collector() -> Iterator[Collector]:
    # The suite installs the otel extra (scripts/test.sh): a missing exporter is a failure.
    importlib.import_module("opentelemetry.exporter.otlp.proto.http")
    running = Collector()
    running.thread.start()
    yield running
    running.server.shutdown()
    running.server.server_close()


def _records(events: list[Any], **options: Any) -> list[SpanRecord]:
    book = SpanBook()
    root = RunSpanSpec(run_id="run-otel", thread_id="thread-otel", agent_name="default")
    book.apply(derive_spans(events, root, **options))
    return book.records


def _attributes(span: Any) -> dict[str, Any]:
    values = {}
    for item in span.attributes:
        value = item.value
        kind = value.WhichOneof("value")
        if kind == "array_value":
            values[item.key] = [getattr(v, v.WhichOneof("value")) for v in value.array_value.values]
        else:
            values[item.key] = getattr(value, kind)
    return values


def test_spans_reach_the_collector_with_their_ids_tree_and_genai_attributes(
    collector: Collector,
) -> None:
    records = _records(fx.PARALLEL_TOOLS)
    trace_id = trace_id_for_run("run-otel")
    export = otlp_export_create(endpoint=f"{collector.url}/v1/traces")

    export.export(trace_id=trace_id, records=records)
    assert export.force_flush(10_000)
    export.shutdown()

    assert set(collector.paths) == {"/v1/traces"}
    spans = {span.name: span for span in collector.spans()}
    assert set(spans) == {
        "invoke_agent default",
        "chat gpt-4o-mini",
        "execute_tool lookup",
        "execute_tool weather",
    }  # the two model calls share a name
    assert len(collector.spans()) == 5
    root = spans["invoke_agent default"]
    assert root.trace_id.hex() == trace_id
    assert root.span_id.hex() == records[0].span_id
    assert root.parent_span_id == b""
    for name in ("chat gpt-4o-mini", "execute_tool lookup"):
        assert spans[name].parent_span_id == root.span_id
    tool = _attributes(spans["execute_tool lookup"])
    assert tool[attr.OPERATION_NAME] == "execute_tool"
    assert tool[attr.TOOL_CALL_ID] == "call-a"
    assert spans["execute_tool lookup"].status.code == 2  # ERROR
    generation = _attributes(spans["chat gpt-4o-mini"])
    assert generation[attr.USAGE_INPUT_TOKENS] == 10
    assert generation[attr.RESPONSE_FINISH_REASONS] in (["tool_calls"], ["stop"])
    assert spans["chat gpt-4o-mini"].kind == 3  # CLIENT
    assert _attributes(root)[attr.CONVERSATION_ID] == "thread-otel"
    # Times are kept: the tool span lasted 4 seconds of the fixture's clock.
    lookup = spans["execute_tool lookup"]
    assert lookup.end_time_unix_nano - lookup.start_time_unix_nano == 4_000_000_000


def test_the_environment_turns_the_export_on(
    collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "copilot-test")
    otlp_export_from_environment.cache_clear()
    try:
        export = otlp_export_from_environment()
        assert export is not None
        export.export(trace_id=trace_id_for_run("r"), records=_records(fx.TEXT_ONLY))
        assert export.force_flush(10_000)
        export.shutdown()
    finally:
        otlp_export_from_environment.cache_clear()

    assert collector.paths and set(collector.paths) == {"/v1/traces"}
    assert len(collector.spans()) == 2


def test_no_endpoint_means_no_export(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in exporter_module.ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    otlp_export_from_environment.cache_clear()
    try:
        assert otlp_export_from_environment() is None
    finally:
        otlp_export_from_environment.cache_clear()


def test_an_endpoint_without_the_packages_is_said_once_and_ignored(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def missing(**_: Any) -> Any:
        raise ImportError("No module named 'opentelemetry'")

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setattr(exporter_module, "otlp_export_create", missing)
    otlp_export_from_environment.cache_clear()
    try:
        with caplog.at_level(logging.WARNING):
            assert otlp_export_from_environment() is None
            assert otlp_export_from_environment() is None
    finally:
        otlp_export_from_environment.cache_clear()

    assert caplog.text.count("OpenTelemetry packages are not installed") == 1


def test_content_goes_under_the_genai_content_names_and_structures_become_json() -> None:
    records = {r.key: r for r in _records(fx.PARALLEL_TOOLS, capture_content=True)}

    tool = otlp_attributes(records["tool:call-b"])
    assert tool[attr.TOOL_CALL_ARGUMENTS] == '{"day":1}'
    assert tool[attr.TOOL_CALL_RESULT] == '{"sunny":true}'
    generation = otlp_attributes(records["generation:2"])
    assert generation[attr.OUTPUT_MESSAGES] == '{"role":"assistant","content":"Done."}'
    assert generation[attr.RESPONSE_FINISH_REASONS] == ["stop"]
    assert generation["copilot.span.kind"] == "generation"
    plain = otlp_attributes(_records(fx.PARALLEL_TOOLS)[2])
    assert attr.TOOL_CALL_ARGUMENTS not in plain
