"""Model constraints, orderings and helpers of the conversations app (and the runtime's own)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from conversations.models import AgentState, Message, Run, RunEvent, RunStatus, Span, Thread
from copilot_runtime.models import ApiToken, GuardrailRule
from tests.conversations.factories import message_row, run_row, state_row, thread_create

pytestmark = pytest.mark.django_db


def test_thread_ids_are_unique() -> None:
    thread_create(thread_id="same")
    with pytest.raises(IntegrityError), transaction.atomic():
        Thread.objects.create(thread_id="same")


def test_a_message_id_is_unique_within_its_thread() -> None:
    thread = thread_create()
    message_row(thread=thread, position=0, message_id="m1")
    with pytest.raises(IntegrityError), transaction.atomic():
        message_row(thread=thread, position=1, message_id="m1")


def test_the_same_message_id_may_appear_in_two_threads() -> None:
    message_row(thread=thread_create(), position=0, message_id="m1")
    message_row(thread=thread_create(), position=0, message_id="m1")

    assert Message.objects.filter(message_id="m1").count() == 2


def test_a_position_is_unique_within_its_thread() -> None:
    thread = thread_create()
    message_row(thread=thread, position=0, message_id="m1")
    with pytest.raises(IntegrityError), transaction.atomic():
        message_row(thread=thread, position=0, message_id="m2")


def test_run_event_sequence_numbers_are_unique_per_run() -> None:
    thread = thread_create()
    first = run_row(thread=thread, status="succeeded")
    second = run_row(thread=thread)
    RunEvent.objects.create(run=first, seq=1, type="RUN_STARTED")
    RunEvent.objects.create(run=second, seq=1, type="RUN_STARTED")
    with pytest.raises(IntegrityError), transaction.atomic():
        RunEvent.objects.create(run=first, seq=1, type="TEXT_MESSAGE_START")


def test_span_ids_are_unique_within_a_trace() -> None:
    run = run_row(thread=thread_create())
    Span.objects.create(
        trace_id="t" * 32,
        span_id="s" * 16,
        run=run,
        kind="run",
        name="run",
        started_at=timezone.now(),
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        Span.objects.create(
            trace_id="t" * 32,
            span_id="s" * 16,
            run=run,
            kind="tool",
            name="again",
            started_at=timezone.now(),
        )


def test_agent_states_read_newest_first_per_thread_and_agent() -> None:
    thread = thread_create()
    state_row(thread=thread, state={"n": 1})
    state_row(thread=thread, state={"n": 2})
    state_row(thread=thread, state={"other": True}, agent_name="zeta")
    newest = state_row(thread=thread, state={"n": 3})

    latest = AgentState.objects.filter(thread=thread, agent_name="default").first()

    assert latest == newest
    assert [s.state for s in AgentState.objects.filter(thread=thread, agent_name="default")] == [
        {"n": 3},
        {"n": 2},
        {"n": 1},
    ]


def test_messages_read_in_position_order() -> None:
    thread = thread_create()
    message_row(thread=thread, position=2, message_id="c")
    message_row(thread=thread, position=0, message_id="a")
    message_row(thread=thread, position=1, message_id="b")

    assert [m.message_id for m in Message.objects.filter(thread=thread)] == ["a", "b", "c"]


def test_run_duration_is_unknown_until_started_and_finished() -> None:
    run = run_row(thread=thread_create())
    assert run.duration_ms is None
    run.started_at = timezone.now()
    assert run.duration_ms is None


def test_run_duration_is_in_milliseconds() -> None:
    started = timezone.now()
    run = Run(started_at=started, finished_at=started + dt.timedelta(seconds=1, milliseconds=250))

    assert run.duration_ms == 1250


@pytest.mark.parametrize(
    ("status", "finished"),
    [
        (RunStatus.PENDING, False),
        (RunStatus.RUNNING, False),
        (RunStatus.SUCCEEDED, True),
        (RunStatus.FAILED, True),
        (RunStatus.CANCELLED, True),
        (RunStatus.INTERRUPTED, True),
    ],
)
def test_run_is_finished_only_in_a_final_status(status: str, finished: bool) -> None:
    assert Run(status=status).is_finished is finished


def test_deleting_a_thread_deletes_its_conversation() -> None:
    thread = thread_create()
    run = run_row(thread=thread)
    message_row(thread=thread, position=0, run=run)
    state_row(thread=thread, state={})
    RunEvent.objects.create(run=run, seq=1, type="RUN_STARTED")

    thread.delete()

    assert not Message.objects.exists()
    assert not AgentState.objects.exists()
    assert not Run.objects.exists()
    assert not RunEvent.objects.exists()


def _span(run: Run, span_id: str) -> Span:
    return Span.objects.create(
        trace_id="t" * 32,
        span_id=span_id,
        run=run,
        kind="run",
        name="invoke_agent default",
        started_at=timezone.now(),
    )


def test_deleting_a_run_deletes_its_log_and_spans_and_nothing_of_another_run() -> None:
    # The ORM's cascade: the database holds no constraint between these rows and their run.
    thread = thread_create()
    run, other = (run_row(thread=thread, status="succeeded") for _ in range(2))
    for owner in (run, other):
        RunEvent.objects.create(run=owner, seq=1, type="RUN_STARTED")
        _span(owner, owner.id[:16])

    run.delete()

    assert list(RunEvent.objects.values_list("run_id", flat=True)) == [other.id]
    assert list(Span.objects.values_list("run_id", flat=True)) == [other.id]


def _foreign_keys(model: type) -> dict[str, tuple[str, str]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return {
        found["columns"][0]: found["foreign_key"]
        for found in constraints.values()
        if found["foreign_key"]
    }


def test_only_the_run_log_and_spans_reference_their_run_without_a_database_constraint() -> None:
    """Every event and span row was checked against its run by a trigger of its own, on
    every turn's hot path (conversations/models.py, ``RunEvent.run``); the conversation's own
    rows keep their constraints."""
    assert "run_id" not in _foreign_keys(RunEvent)
    assert "run_id" not in _foreign_keys(Span)
    assert _foreign_keys(Message)["run_id"] == (Run._meta.db_table, "id")
    assert _foreign_keys(Message)["thread_id"] == (Thread._meta.db_table, "id")
    assert _foreign_keys(Run)["thread_id"] == (Thread._meta.db_table, "id")


def test_string_forms_name_the_row() -> None:
    thread = thread_create(thread_id="t-1")
    assert str(thread) == "t-1"
    thread.title = "Planning a trip"
    assert str(thread) == "Planning a trip"

    message = message_row(thread=thread, position=0, message_id="m-1", kind="result")
    assert str(message) == "result:m-1"

    state = state_row(thread=thread, state={}, agent_name="planner")
    assert str(state).startswith("planner@")

    run = run_row(thread=thread, run_id="run-42")
    assert str(run) == "run-42"
    event = RunEvent.objects.create(run=run, seq=3, type="TEXT_MESSAGE_CONTENT")
    assert str(event) == "run-42#3 TEXT_MESSAGE_CONTENT"

    span = Span(kind="tool", name="searchDocs")
    assert str(span) == "tool:searchDocs"


def test_runtime_model_string_forms() -> None:
    token = ApiToken(name="ci bot", token_prefix="crt_abcdef")
    assert str(token) == "ci bot (crt_abcdef…)"
    rule = GuardrailRule(name="no politics", kind="deny", text="politics")
    assert str(rule) == "deny: no politics"
    assert rule.scope == "all agents"
    rule.agent_name = "planner"
    assert rule.scope == "planner"
