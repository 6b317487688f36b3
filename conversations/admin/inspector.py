"""The session inspector's data: one thread as a readable conversation, its runs and spans.

Everything is paginated and read with a fixed number of queries, whatever the thread's size:
a page of messages (and the state snapshots taken between them), a page of runs, and the
spans of one selected run.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from math import ceil
from typing import Any

from django.db.models import Case, Count, F, Max, Min, Q, QuerySet, TextField, Value, When

from conversations.admin.call_content import attribute_rows, call_prompts
from conversations.admin.paging import Pages, page_number, pages_of
from conversations.admin.rendering import (
    cost_text,
    duration_text,
    json_text,
    json_text_of_string,
)
from conversations.admin.run_logs import RunLog, run_logs
from conversations.admin.state_diff import StateChange, state_changes
from conversations.admin.usage import ThreadUsage, usage_of_thread
from conversations.admin.waterfall import SpanInput, Waterfall, waterfall_layout
from conversations.models import (
    AgentState,
    Message,
    MessageKind,
    Run,
    RunStatus,
    Span,
    Thread,
)
from conversations.services.runs import WORKER_LOST_CODE

MESSAGES_PER_PAGE = 100
RUNS_PER_PAGE = 25
SPANS_PER_PAGE = 500
STATES_PER_PAGE = 200
SPAN_CONTENT_SHOWN = 4000  # characters of a span's input/output shown in the waterfall
ACTIVE_RUN_STATUSES = (RunStatus.PENDING, RunStatus.RUNNING)
_RUN_FIELDS = (
    "id",
    "thread_id",
    "agent_name",
    "protocol",
    "executor",
    "status",
    "error_code",
    "error_details",
    "limit_trips",
    "model",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
    "cost",
    "created_at",
    "started_at",
    "first_token_at",
    "finished_at",
    "cancel_requested",
)


# --- runs -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSummary:
    run: Run

    @property
    def duration(self) -> str:
        return duration_text(self.run.duration_ms)

    @property
    def cost(self) -> str:
        return cost_text(self.run.cost)

    @property
    def is_active(self) -> bool:
        return self.run.status in ACTIVE_RUN_STATUSES

    @property
    def error_message(self) -> str:
        details = self.run.error_details or {}
        return str(details.get("message") or "") if isinstance(details, dict) else ""

    @property
    def ending(self) -> str:
        """How the transcript heads the run's end: a run whose process died under it (killed,
        crashed, its machine lost) was interrupted, not refused or failed by its agent; what
        it had stored stays above, marked unfinished."""
        if self.run.error_code == WORKER_LOST_CODE:
            return "Interrupted: the process executing this run stopped (crashed or was killed)"
        return "The run failed"

    @property
    def limit_trips(self) -> str:
        kinds = [str(trip.get("kind", "?")) for trip in self.run.limit_trips or []]
        return ", ".join(kinds)


def _runs(thread: Thread) -> QuerySet[Run]:
    return Run.objects.filter(thread=thread).only(*_RUN_FIELDS)


def runs_page(*, thread: Thread, page: Any) -> tuple[list[RunSummary], Pages]:
    runs = _runs(thread)
    pages = pages_of(runs.count(), RUNS_PER_PAGE, page)
    offset = (pages.number - 1) * RUNS_PER_PAGE
    rows = runs.order_by("-created_at", "-id")[offset : offset + RUNS_PER_PAGE]
    return [RunSummary(run) for run in rows], pages


# --- spans ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunTrace:
    run: RunSummary
    waterfall: Waterfall
    pages: Pages

    @property
    def span_count(self) -> int:
        return self.pages.total

    @property
    def first_shown(self) -> int:
        return (self.pages.number - 1) * SPANS_PER_PAGE + 1

    @property
    def last_shown(self) -> int:
        return min(self.pages.number * SPANS_PER_PAGE, self.pages.total)


def _clip(value: Any) -> str:
    text = json_text(value)
    return text if len(text) <= SPAN_CONTENT_SHOWN else text[:SPAN_CONTENT_SHOWN] + "\n…"


def run_trace(*, run: RunSummary, page: Any = 1, now: dt.datetime | None = None) -> RunTrace:
    """One page of a run's spans (in start order) on the run's whole timeline."""
    spans_of_run = Span.objects.filter(run_id=run.run.pk)
    number = page_number(page)
    offset = (number - 1) * SPANS_PER_PAGE
    rows = list(spans_of_run.order_by("started_at", "id")[offset : offset + SPANS_PER_PAGE + 1])
    axis = None
    if offset == 0 and len(rows) <= SPANS_PER_PAGE:
        total = len(rows)
    else:  # more than a page: count them, and draw every page on the run's whole timeline
        bounds = spans_of_run.order_by().aggregate(
            total=Count("id"), start=Min("started_at"), end=Max("ended_at")
        )
        total = bounds["total"]
        if bounds["start"] is not None:
            axis = (bounds["start"], bounds["end"] or bounds["start"])
        if not rows and total:  # past the last page: show the last one
            return run_trace(run=run, page=ceil(total / SPANS_PER_PAGE), now=now)
    rows = rows[:SPANS_PER_PAGE]
    prompts = call_prompts(thread_pk=run.run.thread_id, spans=rows)
    spans = [
        SpanInput(
            span_id=span.span_id,
            parent_span_id=span.parent_span_id,
            kind=span.kind,
            name=span.name,
            started_at=span.started_at,
            ended_at=span.ended_at,
            is_error=span.is_error,
            is_complete=span.is_complete,
            attributes={
                "rows": attribute_rows(span.attributes),
                # A model call's input is references: shown as the prompt they rebuild.
                "prompt": prompts.get(span.span_id),
                "input": "" if span.span_id in prompts else _clip(span.input),
                "output": _clip(span.output),
            },
        )
        for span in rows
    ]
    return RunTrace(
        run=run,
        waterfall=waterfall_layout(spans, now=now, axis=axis),
        pages=pages_of(total, SPANS_PER_PAGE, number),
    )


# --- the transcript ---------------------------------------------------------------------------


@dataclass(slots=True)
class Entry:
    """One thing in the transcript; ``kind`` says which fields matter."""

    kind: str  # run, message, reasoning, state, interrupt, answer, run_error
    message: Message | None = None
    result: Message | None = None  # a tool call's result, shown with the call
    arguments: str = ""
    result_text: str = ""
    run: RunSummary | None = None
    state: AgentState | None = None
    changes: list[StateChange] = field(default_factory=list)
    state_text: str = ""
    name: str = ""
    value: str = ""


@dataclass(frozen=True, slots=True)
class Transcript:
    entries: list[Entry]
    pages: Pages
    query: str


def _messages(thread: Thread, query: str) -> QuerySet[Message]:
    # A payload's address (an image or PDF sent by url) is shown; base64 stays in the database
    # and reaches the page through the media view (conversations/admin/media.py).
    messages = (
        Message.objects.filter(thread=thread)
        .defer("image_bytes")
        .annotate(
            media_url=Case(
                When(
                    Q(image_bytes__startswith="https://") | Q(image_bytes__startswith="http://"),
                    then=F("image_bytes"),
                ),
                default=Value(""),
                output_field=TextField(),
            )
        )
    )
    if query:
        messages = messages.filter(
            Q(content__icontains=query)
            | Q(result__icontains=query)
            | Q(action_name__icontains=query)
        )
    return messages


def _states_between(
    thread: Thread, start: dt.datetime | None, end: dt.datetime | None
) -> tuple[list[AgentState], dict[str, AgentState]]:
    """The snapshots taken while this page's messages were written, and each agent's snapshot
    just before them (what the first ones changed)."""
    states = AgentState.objects.filter(thread=thread)
    if start is not None:
        states = states.filter(created_at__gte=start)
    if end is not None:
        states = states.filter(created_at__lt=end)
    shown = list(states.order_by("id")[:STATES_PER_PAGE])
    before: dict[str, AgentState] = {}
    if start is not None:
        earlier = (
            AgentState.objects.filter(thread=thread, created_at__lt=start)
            .order_by("agent_name", "-id")
            .distinct("agent_name")
        )
        before = {state.agent_name: state for state in earlier}
    return shown, before


def _run_extras(run_ids: list[str]) -> tuple[dict[str, Any], dict[str, RunLog]]:
    """The runs met on the page (with the interrupt answers their requests carried), and what
    their logs recorded besides messages."""
    runs: dict[str, Any] = {}
    if not run_ids:
        return runs, {}
    rows = Run.objects.filter(pk__in=run_ids).only(*_RUN_FIELDS)
    answers = dict(
        Run.objects.filter(pk__in=run_ids).values_list("id", "request_payload__meta_events")
    )
    for run in rows:
        runs[run.pk] = (RunSummary(run), answers.get(run.pk) or [])
    return runs, run_logs(run_ids=run_ids)


def _group_start(run_id: str, runs: dict[str, Any]) -> list[Entry]:
    found = runs.get(run_id)
    if found is None:
        return []
    summary, answers = found
    entries = [Entry(kind="run", run=summary)]
    for answer in answers if isinstance(answers, list) else []:
        if isinstance(answer, dict) and answer.get("response") is not None:
            entries.append(
                Entry(
                    kind="answer",
                    name=str(answer.get("name") or "interrupt"),
                    value=json_text(answer.get("response")),
                )
            )
    return entries


def _reasoning_entries(log: RunLog) -> list[Entry]:
    """The run's reasoning not shown yet, as folded entries (taken: shown once)."""
    entries = [
        Entry(kind="reasoning", name="signed" if block.signed else "", value=block.text)
        for block in log.reasoning
    ]
    log.reasoning.clear()
    return entries


def _group_end(run_id: str, runs: dict[str, Any], logs: dict[str, RunLog]) -> list[Entry]:
    log = logs.get(run_id) or RunLog()
    # Reasoning not shown yet (a run whose answer is not on this page, or that stopped).
    entries = _reasoning_entries(log)
    entries.extend(
        Entry(
            kind="interrupt",
            name=str(payload.get("name") or "interrupt"),
            value=json_text(payload.get("value")),
        )
        for payload in log.interrupts
    )
    found = runs.get(run_id)
    if found is not None and found[0].run.error_code:
        entries.append(Entry(kind="run_error", run=found[0]))
    return entries


def transcript_page(*, thread: Thread, page: Any, query: str = "") -> Transcript:
    query = query.strip()
    messages = _messages(thread, query)
    pages = pages_of(messages.count(), MESSAGES_PER_PAGE, page)
    offset = (pages.number - 1) * MESSAGES_PER_PAGE
    # One more than the page: the next page's first message bounds this page's snapshots.
    rows = list(messages.order_by("position")[offset : offset + MESSAGES_PER_PAGE + 1])
    following = rows[MESSAGES_PER_PAGE] if len(rows) > MESSAGES_PER_PAGE else None
    rows = rows[:MESSAGES_PER_PAGE]

    states: list[AgentState] = []
    before: dict[str, AgentState] = {}
    if not query:  # a search shows matching messages only
        start = rows[0].created_at if rows and pages.number > 1 else None
        end = following.created_at if following is not None else None
        states, before = _states_between(thread, start, end)

    run_ids = list(dict.fromkeys(m.run_id for m in rows if m.run_id))
    runs, logs = _run_extras(run_ids) if not query else ({}, {})
    results = {m.action_execution_id: m for m in rows if m.kind == MessageKind.RESULT}
    shown_with_call: set[int] = set()

    entries: list[Entry] = []
    pending_states = list(states)
    current_run: str | None = None

    def add_states(until: dt.datetime | None) -> None:
        while pending_states and (until is None or pending_states[0].created_at <= until):
            state = pending_states.pop(0)
            previous = before.get(state.agent_name)
            before[state.agent_name] = state
            entries.append(
                Entry(
                    kind="state",
                    state=state,
                    changes=state_changes(previous.state if previous else None, state.state),
                    state_text=json_text(state.state),
                )
            )

    for message in rows:
        add_states(message.created_at)
        if message.run_id != current_run and message.run_id is not None:
            if current_run is not None:
                entries.extend(_group_end(current_run, runs, logs))
            current_run = message.run_id
            entries.extend(_group_start(current_run, runs))
        if message.pk in shown_with_call:
            continue
        log = logs.get(current_run) if current_run is not None else None
        if message.kind == MessageKind.REASONING:
            if log is not None:  # stored: the log's copy is not shown again
                log.reasoning.clear()
            sealed = isinstance(message.arguments, dict) and message.arguments.get("encryptedValue")
            name = "signed" if sealed else ""
            entries.append(Entry(kind="reasoning", name=name, value=message.content))
            continue
        if log is not None and log.reasoning and message.role == "assistant":
            # The run's reasoning came before what it answered with.
            entries.extend(_reasoning_entries(log))
        entry = Entry(kind="message", message=message)
        if message.kind == MessageKind.ACTION_EXECUTION:
            entry.arguments = json_text(message.arguments)
            result = results.get(message.message_id)
            if result is not None:
                entry.result = result
                entry.result_text = json_text_of_string(result.result)
                shown_with_call.add(result.pk)
        elif message.kind == MessageKind.RESULT:
            entry.result_text = json_text_of_string(message.result)
        entries.append(entry)
    add_states(None if following is None else following.created_at)
    if current_run is not None and (following is None or following.run_id != current_run):
        entries.extend(_group_end(current_run, runs, logs))
    return Transcript(entries=entries, pages=pages, query=query)


# --- the page ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThreadPage:
    thread: Thread
    usage: ThreadUsage
    usage_cost: str
    transcript: Transcript | None
    runs: list[RunSummary] | None
    runs_pages: Pages | None
    trace: RunTrace | None


def thread_page(
    *,
    thread: Thread,
    page: Any = 1,
    query: str = "",
    runs_page_number: Any = 1,
    run_id: str | None = None,
    spans_page: Any = 1,
    show_messages: bool = True,
    show_runs: bool = True,
    show_spans: bool = True,
    now: dt.datetime | None = None,
) -> ThreadPage:
    usage = usage_of_thread(thread=thread)
    transcript = transcript_page(thread=thread, page=page, query=query) if show_messages else None
    runs: list[RunSummary] | None = None
    pages: Pages | None = None
    trace: RunTrace | None = None
    if show_runs:
        runs, pages = runs_page(thread=thread, page=runs_page_number)
        selected = next((r for r in runs if r.run.pk == run_id), None)
        if selected is None and run_id:
            found = _runs(thread).filter(pk=run_id).first()
            selected = RunSummary(found) if found is not None else None
        if selected is None and runs and not run_id:
            selected = runs[0]
        if selected is not None and show_spans:
            trace = run_trace(run=selected, page=spans_page, now=now)
    return ThreadPage(
        thread=thread,
        usage=usage,
        usage_cost=cost_text(usage.cost),
        transcript=transcript,
        runs=runs,
        runs_pages=pages,
        trace=trace,
    )
