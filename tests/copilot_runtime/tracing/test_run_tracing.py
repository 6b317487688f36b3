"""A real turn (fake model upstream, a server action) is traced by the executor."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import orjson
import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from conversations.models import Run, RunStatus, Span
from conversations.store import spans as store_module
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.models import ModelPrice
from copilot_runtime.runs.start import turn_start
from copilot_runtime.tracing import semconv as attr
from copilot_runtime.tracing import tracer as tracer_module

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def runtime_on_fake(fake_upstream: Any) -> Iterator[None]:
    with override_settings(
        COPILOT_RUNTIME={
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": fake_upstream.base_url,
            "OPENAI_MAX_RETRIES": 0,
            "ACTIONS": ["tests.support.actions.server_add"],
            "EVENT_FLUSH_MS": 5,
        }
    ):
        yield


def _request(directive: dict[str, Any], *, thread_id: str = "traced-thread") -> Any:
    return parse_generate_input(
        {
            "threadId": thread_id,
            "frontend": {"actions": []},
            "messages": [
                {
                    "id": "u1",
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "textMessage": {
                        "content": "FAKE: " + orjson.dumps(directive).decode(),
                        "role": "user",
                    },
                }
            ],
            "metadata": {"requestType": "Chat"},
        },
        {},
    )


async def _traced_run(request: Any) -> tuple[Run, list[Span]]:
    started = await turn_start(user=AnonymousUser(), request=request, protocol="graphql")
    while await asyncio.wait_for(started.events.get(), 10) is not None:
        pass
    for _ in range(200):  # spans are written just after the run's end is announced
        run = await Run.objects.aget(pk=started.run_id)
        spans = [s async for s in Span.objects.filter(run_id=run.pk).order_by("started_at", "id")]
        if run.is_finished and spans:
            return run, spans
        await asyncio.sleep(0.025)
    raise AssertionError("the run was not traced")


SERVER_ACTION_TURN = {
    "steps": [
        {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 2, "b": 3}}]},
        {"text": "The sum is 5."},
    ]
}


async def test_a_turn_with_a_server_action_is_a_run_with_two_calls_and_a_tool(
    runtime_on_fake: None,
) -> None:
    await ModelPrice.objects.acreate(
        model="gpt-4o-mini", input_per_million="0.15", output_per_million="0.60"
    )

    run, spans = await _traced_run(_request(SERVER_ACTION_TURN))

    assert run.status == RunStatus.SUCCEEDED
    assert [(s.kind, s.name) for s in spans] == [
        ("run", "invoke_agent default"),
        ("generation", "chat gpt-4o-mini"),
        ("tool", "execute_tool serverAdd"),
        ("generation", "chat gpt-4o-mini"),
    ]
    root = spans[0]
    assert all(s.parent_span_id == root.span_id for s in spans[1:])
    assert all(s.is_complete for s in spans)
    assert spans[2].is_error is False
    assert root.attributes[attr.CONVERSATION_ID] == "traced-thread"
    assert root.attributes[attr.PROVIDER_NAME] == "openai"
    assert root.attributes[attr.RUN_STATUS] == "succeeded"
    # The usage on the spans is the run's usage, call by call.
    generations = [s.attributes for s in spans if s.kind == "generation"]
    assert sum(g[attr.USAGE_INPUT_TOKENS] for g in generations) == run.input_tokens
    assert sum(g[attr.USAGE_OUTPUT_TOKENS] for g in generations) == run.output_tokens
    assert root.attributes[attr.USAGE_INPUT_TOKENS] == run.input_tokens
    assert [g[attr.RESPONSE_FINISH_REASONS] for g in generations] == [["tool_calls"], ["stop"]]
    assert all(g[attr.RESPONSE_TIME_TO_FIRST_CHUNK] >= 0 for g in generations)
    # Cost: priced per call, summed on the run.
    expected = (run.input_tokens * Decimal("0.15") + run.output_tokens * Decimal("0.60")) / Decimal(
        1_000_000
    )
    assert run.cost is not None and abs(run.cost - expected) < Decimal("1e-9")
    assert root.attributes[attr.USAGE_COST] == pytest.approx(float(expected))
    # The tool span lies between the two model calls.
    assert spans[1].ended_at <= spans[3].started_at
    assert spans[2].started_at <= spans[1].ended_at <= spans[2].ended_at


async def test_a_failed_upstream_call_is_an_error_span(runtime_on_fake: None) -> None:
    run, spans = await _traced_run(
        _request({"error": {"status": 500, "message": "upstream down"}}, thread_id="t-fail")
    )

    assert run.status == RunStatus.FAILED
    root, generation = spans
    assert generation.is_error is True
    assert generation.attributes[attr.ERROR_TYPE] == run.error_code
    assert root.is_error is True
    assert root.attributes[attr.RUN_STATUS] == "failed"


async def test_a_failing_span_write_still_stores_the_runs_end(
    runtime_on_fake: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(**_: Any) -> None:
        raise RuntimeError("no spans today")

    monkeypatch.setattr(store_module, "spans_store", broken)
    with caplog.at_level(logging.WARNING, logger="copilot_runtime.runs.execute"):
        started = await turn_start(
            user=AnonymousUser(),
            request=_request(SERVER_ACTION_TURN, thread_id="t-nospans"),
            protocol="graphql",
        )
        while await asyncio.wait_for(started.events.get(), 10) is not None:
            pass

    # The run's end is committed before watchers are told: no waiting needed.
    run = await Run.objects.aget(pk=started.run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert await Span.objects.filter(run_id=run.pk).acount() == 0
    assert "storing the spans of run" in caplog.text


async def test_a_tracing_failure_does_not_touch_the_run(
    runtime_on_fake: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**_: Any) -> None:
        raise RuntimeError("no spans today")

    def broken_observe(self: Any, event: Any, at: float) -> Any:
        raise RuntimeError("no deriving either")

    monkeypatch.setattr(store_module, "spans_store", broken)
    monkeypatch.setattr(tracer_module.SpanDeriver, "observe", broken_observe)
    started = await turn_start(
        user=AnonymousUser(),
        request=_request(SERVER_ACTION_TURN, thread_id="t-broken"),
        protocol="graphql",
    )
    events = []
    while (event := await asyncio.wait_for(started.events.get(), 10)) is not None:
        events.append(event)

    assert events[-1].type == "run_finished"
    for _ in range(200):
        run = await Run.objects.aget(pk=started.run_id)
        if run.is_finished:
            break
        await asyncio.sleep(0.025)
    assert run.status == RunStatus.SUCCEEDED
    assert await Span.objects.filter(run_id=run.pk).acount() == 0
