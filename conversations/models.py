"""Threads, their messages and agent states, runs, the per-run event log and trace spans."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class NextHistoryVersion(models.Func):
    """A new thread's history version: the next value of migration 0009's sequence on
    PostgreSQL. Elsewhere (SQLite, the embedded default) no trigger draws versions and no
    process reads them (the ORM store asks about every id at every turn): 0."""

    arity = 0
    output_field = models.BigIntegerField()

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        return "0", []

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        return "nextval('conversations_history_version')", []


class HistoryVersionField(models.BigIntegerField):
    """A thread's history version (migration 0009): drawn by the database when the thread is
    made and whenever a statement changes or deletes its messages, never written by the ORM. A
    thread the ORM creates takes the column's default; a thread the ORM saves leaves it as the
    database has it (an instance read before a change would otherwise write an old version
    back, and a process that knew the thread's messages at that version would take them for
    current)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("db_default", NextHistoryVersion())
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("db_default", None)
        kwargs.pop("editable", None)
        return name, path, args, kwargs

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        if add:
            return super().pre_save(model_instance, add)
        return models.F(self.attname)  # an UPDATE sets it to itself


class ThreadStatus(models.TextChoices):
    IDLE = "idle", "Idle"
    RUNNING = "running", "Running"
    INTERRUPTED = "interrupted", "Interrupted"
    ARCHIVED = "archived", "Archived"


class Thread(models.Model):
    """A conversation, named by the client's own thread id within its owner's threads.

    Client thread ids are scoped to their owner (migration 0012): another caller's id names a
    thread of that caller's own, so no answer tells a caller which ids others use. Anonymous
    callers (owner NULL) share one namespace of their own.
    """

    # Unique per owner: see the constraints below (its index leads with this column).
    thread_id = models.CharField(max_length=255)
    # Null for anonymous threads. A deleted user's threads go with them: with SET_NULL they
    # would turn into anonymous threads, readable by any anonymous caller.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="copilot_threads",
        db_index=False,  # thread_owner_recent leads with the owner
    )
    agent_name = models.CharField(max_length=255, default="default")
    title = models.CharField(max_length=255, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=ThreadStatus, default=ThreadStatus.IDLE)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # What a process that knows the thread's messages checks they are still as it knew them
    # (conversations/store/pg/history_ids.py).
    history_version = HistoryVersionField()

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "-updated_at"], name="thread_owner_recent")]
        # The admin's operations each have a permission of their own: a change permission
        # would let its holder rewrite the record too.
        permissions = [("clear_interrupt", "Can clear a thread's pending interrupt")]
        constraints = [
            # Led by the thread id: the turn's look-up by (id, owner) probes it, and a filter
            # on the id alone (the admin's) still finds its rows through it.
            models.UniqueConstraint(fields=["thread_id", "owner"], name="thread_unique_per_owner"),
            # PostgreSQL (and SQLite) treat NULLs as distinct in the constraint above, which
            # would let anonymous callers hold two threads under one id. A partial index rather
            # than ``nulls_distinct=False``: that needs PostgreSQL 15 and is ignored on SQLite,
            # the embedded default.
            models.UniqueConstraint(
                fields=["thread_id"],
                condition=models.Q(owner__isnull=True),
                name="thread_unique_anonymous",
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.thread_id


class MessageKind(models.TextChoices):
    TEXT = "text", "Text"
    ACTION_EXECUTION = "action_execution", "Action execution"
    RESULT = "result", "Result"
    AGENT_STATE = "agent_state", "Agent state"
    IMAGE = "image", "Image"
    DOCUMENT = "document", "Document"
    # A block of the model's reasoning (``content``; ``arguments`` holds its
    # ``encryptedValue`` when the provider signed it). Set aside like agent states: clients
    # differ in whether they send reasoning back, so its absence from a history means nothing.
    REASONING = "reasoning", "Reasoning"


# Stored kinds a client's history may leave out without it meaning a regenerate or an edit:
# never superseded by a history that lacks them, and counted with the superseded rows.
SET_ASIDE_KINDS = (MessageKind.AGENT_STATE, MessageKind.REASONING)


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    SYSTEM = "system", "System"
    DEVELOPER = "developer", "Developer"
    TOOL = "tool", "Tool"


class MessageStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SUCCESS = "success", "Success"
    FAILED = "failed", "Failed"


class Message(models.Model):
    """One row per text message, per tool call (action execution) and per tool result.

    ``position`` orders a thread densely. Rows are matched on the client's ``message_id``, so a
    client resending its whole history never duplicates them; rows after a divergence in the
    client's history are marked ``superseded``, never deleted.
    """

    # No index of its own: message_unique_id and message_unique_position lead with the thread.
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    position = models.PositiveIntegerField()
    message_id = models.CharField(max_length=255)
    kind = models.CharField(max_length=24, choices=MessageKind)
    role = models.CharField(max_length=16, choices=MessageRole, blank=True, default="")
    content = models.TextField(blank=True, default="")
    action_name = models.CharField(max_length=255, blank=True, default="")
    arguments = models.JSONField(null=True, blank=True)
    parent_message_id = models.CharField(max_length=255, blank=True, default="")
    action_execution_id = models.CharField(max_length=255, blank=True, default="")
    result = models.TextField(blank=True, default="")
    image_format = models.CharField(max_length=32, blank=True, default="")
    image_bytes = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=MessageStatus, default=MessageStatus.SUCCESS)
    status_reason = models.TextField(blank=True, default="")
    superseded = models.BooleanField(default=False)
    run = models.ForeignKey(
        "Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["thread", "position"]
        constraints = [
            models.UniqueConstraint(fields=["thread", "message_id"], name="message_unique_id"),
            models.UniqueConstraint(fields=["thread", "position"], name="message_unique_position"),
        ]
        # The rows a turn's look-up counts (see conversations/store/pg.py): few in a thread,
        # so counting them does not read the thread's current messages.
        indexes = [
            models.Index(
                fields=["thread"],
                name="message_set_aside",
                condition=models.Q(superseded=True)
                | models.Q(kind__in=["agent_state", "reasoning"]),
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.message_id}"


class AgentState(models.Model):
    """One snapshot of an agent's state on a thread; the newest row is the current state."""

    thread = models.ForeignKey(  # agentstate_latest leads with the thread
        Thread, on_delete=models.CASCADE, related_name="agent_states", db_index=False
    )
    agent_name = models.CharField(max_length=255)
    state = models.JSONField(default=dict, blank=True)
    config = models.JSONField(default=dict, blank=True)
    node_name = models.CharField(max_length=255, blank=True, default="")
    run_id = models.CharField(max_length=255, blank=True, default="")
    active = models.BooleanField(default=False)
    running = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["thread", "agent_name", "-id"]
        indexes = [
            models.Index(fields=["thread", "agent_name", "-id"], name="agentstate_latest"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_name}@{self.thread.thread_id}"


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    INTERRUPTED = "interrupted", "Interrupted"


# A run in these holds its thread: no other run starts on it, and it is not deleted.
ACTIVE_STATUSES = (RunStatus.PENDING, RunStatus.RUNNING)


class Run(models.Model):
    """One turn on a thread. v1 runs get a server id; v2 runs keep the client's ``runId``."""

    FINISHED_STATUSES = (
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.INTERRUPTED,
    )

    id = models.CharField(primary_key=True, max_length=64)
    thread = models.ForeignKey(  # run_thread_recent leads with the thread
        Thread, on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    agent_name = models.CharField(max_length=255, default="default")
    protocol = models.CharField(max_length=16, default="graphql")
    # Where the run executed ("inline" in the serving process, "celery" on a worker); written
    # with the run's row. Blank for runs made before it was recorded.
    executor = models.CharField(max_length=16, blank=True, default="")
    request_type = models.CharField(max_length=32, default="Chat")
    previous_run_id = models.CharField(max_length=255, blank=True, default="")
    status = models.CharField(max_length=16, choices=RunStatus, default=RunStatus.PENDING)
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_details = models.JSONField(null=True, blank=True)
    # Loop limits and circuit breakers that tripped during the run (see engine/breakers.py).
    limit_trips = models.JSONField(default=list, blank=True)
    model = models.CharField(max_length=255, blank=True, default="")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cached_input_tokens = models.PositiveIntegerField(default=0)
    reasoning_tokens = models.PositiveIntegerField(default=0)
    # USD, from the model prices (copilot_runtime.ModelPrice); null when no call was priced.
    cost = models.DecimalField(max_digits=20, decimal_places=10, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    first_token_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # What the run keeps of its request: the interrupt answers it carried (the inspector shows
    # them). The executor's copy of the whole request travels in the run's task; runs queued
    # by earlier versions hold it here.
    request_payload = models.JSONField(null=True, blank=True, editable=False)
    # Set by a stop; the process executing the run checks it (and is told on the layer).
    cancel_requested = models.BooleanField(default=False)
    attempts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["thread", "-created_at"], name="run_thread_recent"),
            models.Index(fields=["status", "-created_at"], name="run_status_recent"),
            # The usage page's periods: a range of creation times reads only its own runs.
            models.Index(fields=["created_at"], name="run_created"),
        ]
        permissions = [("stop_run", "Can stop a run")]
        constraints = [
            # One run at a time per thread, kept by the database itself: two requests racing
            # on one thread cannot both start a run, whatever process serves them.
            models.UniqueConstraint(
                fields=["thread"],
                condition=models.Q(status__in=["pending", "running"]),
                name="run_one_active_per_thread",
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED_STATUSES

    @property
    def duration_ms(self) -> int | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return int((self.finished_at - self.started_at).total_seconds() * 1000)


class UsageReport(Run):
    """The admin's usage page, as an entry of the admin index (a proxy: no table of its own)."""

    class Meta:
        proxy = True
        verbose_name = verbose_name_plural = "usage and cost"


class RunEvent(models.Model):
    """The durable, ordered log of a run's canonical events (consecutive ``seq`` from 1)."""

    # No foreign-key constraint in the database (nor on ``Span.run``). A run's batches insert
    # about nine log and span rows, and the database checked each against the run's row with a
    # trigger of its own (a locking read of the run per row), a large share of PostgreSQL's
    # work per turn. Only the run's own executor writes
    # these rows, for a run it has just created or read. Django still deletes them with their
    # run (``on_delete`` is the ORM's, not the database's) and retention deletes them first; a
    # run deleted by hand in SQL leaves its log behind, where a constraint would have refused.
    run = models.ForeignKey(  # runevent_unique_seq leads with the run
        Run, on_delete=models.CASCADE, related_name="events", db_index=False, db_constraint=False
    )
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=48)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="runevent_unique_seq")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.type}"


class SpanKind(models.TextChoices):
    RUN = "run", "Run"
    GENERATION = "generation", "Generation"
    TOOL = "tool", "Tool"
    GUARDRAIL = "guardrail", "Guardrail"
    AGENT = "agent", "Agent"
    REASONING = "reasoning", "Reasoning"


class Span(models.Model):
    """A trace span derived from a run's event stream."""

    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True, default="")
    # No foreign-key constraint in the database: see ``RunEvent.run``.
    run = models.ForeignKey(  # span_run_time leads with the run
        Run, on_delete=models.CASCADE, related_name="spans", db_index=False, db_constraint=False
    )
    kind = models.CharField(max_length=16, choices=SpanKind)
    name = models.CharField(max_length=255)
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    is_error = models.BooleanField(null=True)
    is_complete = models.BooleanField(default=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "started_at"]
        constraints = [
            models.UniqueConstraint(fields=["trace_id", "span_id"], name="span_unique_id"),
        ]
        indexes = [models.Index(fields=["run", "started_at"], name="span_run_time")]

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


class TraceBlob(models.Model):
    """A piece of content spans share, stored once: a system prompt or a set of tool
    definitions, keyed by the sha256 of its canonical JSON (copilot_runtime/tracing/content.py).
    ``last_used_at`` is moved forward by a run that uses it (at most hourly), so retention
    deletes only what no kept span refers to."""

    sha256 = models.CharField(primary_key=True, max_length=64)
    content = models.JSONField()
    last_used_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.sha256[:12]
