"""A thread worth inspecting: two runs with tool calls, agent states, an interrupt, a failure,
a superseded answer, a message with HTML in it, and the runs' spans. Shared by the
inspector's tests and its browser test."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.utils import timezone

from conversations.models import AgentState, Message, Run, RunEvent, Span, Thread

SCRIPT_MESSAGE = "Please render <script>alert('xss')</script><b>bold</b> as text"
T0 = dt.datetime(2026, 3, 1, 9, 0, 0, tzinfo=dt.UTC)


@dataclass
class InspectedThread:
    thread: Thread
    first_run: Run
    second_run: Run


def _at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def _message(thread: Thread, position: int, at: float, **fields: Any) -> Message:
    fields.setdefault("kind", "text")
    fields.setdefault("message_id", f"msg-{position}")
    return Message.objects.create(thread=thread, position=position, created_at=_at(at), **fields)


def _state(thread: Thread, at: float, state: dict[str, Any]) -> AgentState:
    row = AgentState.objects.create(thread=thread, agent_name="travel", state=state)
    AgentState.objects.filter(pk=row.pk).update(created_at=_at(at))
    return row


def _span(
    run: Run,
    span_id: str,
    parent: str,
    kind: str,
    name: str,
    start: float,
    end: float | None,
    **fields: Any,
) -> Span:
    return Span.objects.create(
        trace_id="a" * 32,
        span_id=span_id,
        parent_span_id=parent,
        run=run,
        kind=kind,
        name=name,
        started_at=_at(start),
        ended_at=_at(end) if end is not None else None,
        **fields,
    )


def inspected_thread_create(
    *, owner: Any = None, thread_id: str = "inspected-thread"
) -> InspectedThread:
    thread = Thread.objects.create(
        thread_id=thread_id,
        owner=owner,
        agent_name="travel",
        title="Trip planning",
        status="interrupted",
    )
    first = Run.objects.create(
        id="run-first",
        thread=thread,
        agent_name="travel",
        status="interrupted",
        model="gpt-4o-mini",
        input_tokens=1200,
        output_tokens=300,
        cached_input_tokens=200,
        cost=Decimal("0.00036"),
        started_at=_at(0),
        finished_at=_at(2.5),
    )
    second = Run.objects.create(
        id="run-second",
        thread=thread,
        agent_name="travel",
        status="failed",
        model="gpt-4o-mini",
        input_tokens=800,
        output_tokens=20,
        error_code="UPSTREAM_SERVER_ERROR",
        error_details={"message": "The model service answered 500."},
        request_payload={
            "meta_events": [{"name": "LangGraphInterruptEvent", "response": "yes, book it"}]
        },
        started_at=_at(10),
        finished_at=_at(11),
    )
    Run.objects.filter(pk=first.pk).update(created_at=_at(0))
    Run.objects.filter(pk=second.pk).update(created_at=_at(10))

    _message(thread, 0, 0.0, role="user", content="Plan a weekend in Lisbon", run=first)
    _message(
        thread,
        1,
        0.5,
        kind="action_execution",
        role="assistant",
        message_id="call-weather",
        action_name="lookupWeather",
        arguments={"city": "Lisbon"},
        run=first,
    )
    _message(
        thread,
        2,
        1.0,
        kind="result",
        role="tool",
        message_id="result-call-weather",
        action_execution_id="call-weather",
        action_name="lookupWeather",
        result='{"forecast": "sunny", "high": 24}',
        run=first,
    )
    _state(thread, 1.5, {"city": "Lisbon", "days": 2})
    _message(
        thread, 3, 2.0, role="assistant", content="An older answer", superseded=True, run=first
    )
    _message(thread, 4, 2.2, role="assistant", content="Shall I book the hotel?", run=first)
    _state(thread, 2.3, {"city": "Lisbon", "days": 3, "hotel": "pending"})
    RunEvent.objects.create(
        run=first,
        seq=1,
        type="meta_event",
        payload={"name": "LangGraphInterruptEvent", "value": "Book the hotel?"},
    )
    _message(thread, 5, 10.0, role="user", content=SCRIPT_MESSAGE, run=second)
    _message(
        thread,
        6,
        10.5,
        role="assistant",
        content="Booking",
        status="failed",
        status_reason="Error streaming message content",
        run=second,
    )

    # Spans of the first run: a run span, two model calls, a tool (an error) and an open one.
    _span(
        first,
        "1000000000000001",
        "",
        "agent",
        "invoke_agent travel",
        0,
        2.5,
        attributes={"gen_ai.agent.name": "travel"},
        is_error=False,
    )
    _span(
        first,
        "1000000000000002",
        "1000000000000001",
        "generation",
        "chat gpt-4o-mini",
        0.1,
        0.5,
        attributes={"gen_ai.usage.input_tokens": 600, "gen_ai.usage.cost": 0.00018},
        is_error=None,
    )
    _span(
        first,
        "1000000000000003",
        "1000000000000001",
        "tool",
        "execute_tool lookupWeather",
        0.5,
        1.0,
        is_error=True,
        attributes={"error.type": "tool_error"},
    )
    _span(
        first,
        "1000000000000004",
        "1000000000000001",
        "generation",
        "chat gpt-4o-mini",
        1.0,
        2.2,
        is_error=None,
    )
    _span(
        first,
        "1000000000000005",
        "1000000000000001",
        "tool",
        "execute_tool bookHotel",
        2.2,
        2.5,
        is_error=None,
        is_complete=False,
        attributes={"copilot.span.closed_by": "run_end"},
    )
    _span(second, "2000000000000001", "", "agent", "invoke_agent travel", 10, 11, is_error=True)
    return InspectedThread(thread=thread, first_run=first, second_run=second)


def big_thread_create(
    *, messages: int, runs: int, spans_per_run: int, spans_of_run: dict[int, int] | None = None
) -> Thread:
    """A thread of ``messages`` messages over ``runs`` runs, each with ``spans_per_run`` spans
    but those ``spans_of_run`` names by index (bulk inserted)."""
    thread = Thread.objects.create(thread_id="big-thread", agent_name="default")
    now = timezone.now()
    run_rows = Run.objects.bulk_create(
        [
            Run(
                id=f"big-run-{i:05d}",
                thread=thread,
                status="succeeded",
                model="gpt-4o-mini",
                input_tokens=100,
                output_tokens=10,
                started_at=now,
                finished_at=now,
            )
            for i in range(runs)
        ]
    )
    per_run = max(1, messages // runs)
    Message.objects.bulk_create(
        [
            Message(
                thread=thread,
                position=i,
                message_id=f"big-{i}",
                kind="text",
                role="user" if i % 2 == 0 else "assistant",
                content=f"message number {i}",
                run=run_rows[min(i // per_run, runs - 1)],
                created_at=now + dt.timedelta(milliseconds=i),
            )
            for i in range(messages)
        ],
        batch_size=2000,
    )
    spans = []
    for r, run in enumerate(run_rows):
        root = f"{r:08x}00000000"
        for s in range((spans_of_run or {}).get(r, spans_per_run)):
            spans.append(
                Span(
                    trace_id=f"{r:032x}",
                    span_id=f"{r:08x}{s:08x}",
                    parent_span_id="" if s == 0 else root,
                    run=run,
                    kind="run" if s == 0 else "tool",
                    name=f"span {s}",
                    started_at=now + dt.timedelta(milliseconds=s),
                    ended_at=now + dt.timedelta(milliseconds=s + 1),
                )
            )
    Span.objects.bulk_create(spans, batch_size=5000)
    return thread
