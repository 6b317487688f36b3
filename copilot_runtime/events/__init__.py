"""The canonical event model of a turn.

Every turn, whatever runs it (the chat engine, an agent), produces one ordered stream of these
events. Everything else is derived from that stream: the persisted messages, the run's event
log, usage, spans, and each protocol's wire format. Events are small slotted dataclasses
because the hot path creates one per token.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


@dataclass(slots=True)
class Event:
    type: ClassVar[str] = "event"

    def to_payload(self) -> dict[str, Any]:
        # A shallow dict: ``dataclasses.asdict`` deep-copies every field, which cost more per
        # token than the rest of the recorder. Events are never mutated after they are emitted.
        names = _FIELD_NAMES.get(type(self))
        if names is None:
            # A field marked local is the process's own (never logged, never sent).
            names = _FIELD_NAMES[type(self)] = tuple(
                f.name for f in fields(self) if not f.metadata.get("local")
            )
        return {name: getattr(self, name) for name in names}


@dataclass(slots=True)
class TextStart(Event):
    type: ClassVar[str] = "text_start"
    message_id: str
    parent_message_id: str | None = None
    role: str = "assistant"


@dataclass(slots=True)
class TextDelta(Event):
    type: ClassVar[str] = "text_delta"
    message_id: str
    delta: str


@dataclass(slots=True)
class TextEnd(Event):
    type: ClassVar[str] = "text_end"
    message_id: str


@dataclass(slots=True)
class ReasoningStart(Event):
    """The model begins a block of reasoning (one message of role ``reasoning``)."""

    type: ClassVar[str] = "reasoning_start"
    message_id: str


@dataclass(slots=True)
class ReasoningDelta(Event):
    type: ClassVar[str] = "reasoning_delta"
    message_id: str
    delta: str


@dataclass(slots=True)
class ReasoningEnd(Event):
    """The block ended: always before the text or tool calls that follow it."""

    type: ClassVar[str] = "reasoning_end"
    message_id: str
    # What replays the block to its provider (events/reasoning.py), "" for none.
    encrypted_value: str = ""


@dataclass(slots=True)
class ActionStart(Event):
    type: ClassVar[str] = "action_start"
    action_execution_id: str
    action_name: str
    parent_message_id: str | None = None


@dataclass(slots=True)
class ActionArgs(Event):
    type: ClassVar[str] = "action_args"
    action_execution_id: str
    delta: str


@dataclass(slots=True)
class ActionEnd(Event):
    type: ClassVar[str] = "action_end"
    action_execution_id: str


@dataclass(slots=True)
class ActionResult(Event):
    type: ClassVar[str] = "action_result"
    action_execution_id: str
    action_name: str
    result: str
    is_error: bool = False


@dataclass(slots=True)
class AgentStateSnapshot(Event):
    type: ClassVar[str] = "agent_state"
    thread_id: str
    agent_name: str
    state: dict[str, Any]
    node_name: str = ""
    run_id: str = ""
    active: bool = True
    running: bool = True
    role: str = "assistant"
    # Set when the state came from a JSON Patch (the state tools' AGUISendStateDelta): v2 sends
    # this patch as its STATE_DELTA, as TypeScript does. ``replaced``: the state was replaced
    # whole (AGUISendStateSnapshot), sent as a STATE_SNAPSHOT whatever would be smaller.
    delta: list[dict[str, Any]] | None = None
    replaced: bool = False


@dataclass(slots=True)
class MetaEvent(Event):
    type: ClassVar[str] = "meta_event"
    name: str
    value: Any = None
    data: dict[str, Any] | None = None


@dataclass(slots=True)
class GenerationStart(Event):
    """A model call begins (one per iteration of the tool loop)."""

    type: ClassVar[str] = "generation_start"
    model: str
    parameters: dict[str, Any] = field(default_factory=dict)
    # The call's ``ModelRequest``, for the tracer's content capture only: never logged or sent.
    request: Any = field(default=None, compare=False, repr=False, metadata={"local": True})


@dataclass(slots=True)
class GenerationEnd(Event):
    """A model call ended, with the usage the provider reported for it."""

    type: ClassVar[str] = "generation_end"
    model: str
    finish_reason: str | None = None  # as the provider said it (OpenAI's words)
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    provider: str = ""  # who served it, in the AI SDK's terms ("openai.chat")
    # Input tokens written to the provider's prompt cache (Anthropic's cache creation), counted
    # in ``input_tokens`` too, as ``cached_input_tokens`` is. A later field (``LATER_FIELDS``).
    cache_write_input_tokens: int = 0


@dataclass(slots=True)
class GuardrailDecision(Event):
    """The guardrails' verdict on the turn's last user message (copilot_runtime/guardrails).

    Carries the usage of the model call a classifier made, which counts in the run's usage
    like a generation's (it is not a ``generation_*`` pair: in parallel mode it would overlap
    the turn's own model call).
    """

    type: ClassVar[str] = "guardrail_decision"
    denied: bool
    reason: str = ""
    name: str = "input"
    mode: str = "blocking"
    evaluators: str = ""  # comma-separated: local, model, cloud
    rules: int = 0
    latency_ms: int = 0
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_input_tokens: int = 0  # a later field, as on ``GenerationEnd``


@dataclass(slots=True)
class LimitTrip(Event):
    """A loop limit or circuit breaker tripped (recorded on the run, visible in the admin)."""

    type: ClassVar[str] = "limit_trip"
    kind: str  # max_iterations, tool_circuit_breaker, circuit_breaker_empty_tool_calls
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RunError(Event):
    type: ClassVar[str] = "run_error"
    message: str
    code: str = "UNKNOWN"
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RunFinished(Event):
    type: ClassVar[str] = "run_finished"
    status: str = "succeeded"


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        TextStart,
        TextDelta,
        TextEnd,
        ReasoningStart,
        ReasoningDelta,
        ReasoningEnd,
        ActionStart,
        ActionArgs,
        ActionEnd,
        ActionResult,
        AgentStateSnapshot,
        MetaEvent,
        GenerationStart,
        GenerationEnd,
        GuardrailDecision,
        LimitTrip,
        RunError,
        RunFinished,
    )
}


def result_message_id(action_execution_id: str) -> str:
    """The id of the message holding a tool call's result: stored under it, and answered
    under it by both protocols."""
    return f"result-{action_execution_id}"


def event_from_payload(event_type: str, payload: dict[str, Any]) -> Event:
    """Rebuild an event from the run's log.

    A field this release does not know is left out: workers are upgraded before web
    processes, so a newer worker's event may carry a field added after this release, and a
    release can add one only if the one before it reads past it."""
    kind = EVENT_TYPES[event_type]
    try:
        return kind(**payload)
    except TypeError:
        known = _KNOWN_FIELDS[kind]
        if known.issuperset(payload):
            raise  # a field missing or mistyped: not a newer release's
        return kind(**{name: value for name, value in payload.items() if name in known})


# Every field of each event, the local ones too (``to_payload``'s cache leaves those out).
_KNOWN_FIELDS: dict[type[Event], frozenset[str]] = {
    kind: frozenset(f.name for f in fields(kind)) for kind in EVENT_TYPES.values()
}

# The fields added after the first release, which a web process of that release cannot read
# (it rebuilt events strictly; this release and later ones read past what they do not know).
# A worker leaves them out of the events of a run that such a process queued: the task's
# placement says when its web process reads them (``READS_LATER_FIELDS``).
LATER_FIELDS: dict[str, tuple[str, ...]] = {
    GenerationEnd.type: ("cache_write_input_tokens",),
    GuardrailDecision.type: ("cache_write_input_tokens",),
}
READS_LATER_FIELDS = "reads_later_fields"


def without_later_fields(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` as a web process of the first release can rebuild it (see ``LATER_FIELDS``)."""
    later = LATER_FIELDS.get(event_type)
    if later is None:
        return payload
    return {name: value for name, value in payload.items() if name not in later}
