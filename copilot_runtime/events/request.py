"""The protocol-neutral request for one turn: what every protocol surface parses its input into
(v1: copilot_runtime/graphql/turn_input.py, v2: copilot_runtime/agui/run_input.py), what the
engine, the guardrails and the store read, and its JSON form for the worker that executes it."""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
from dataclasses import dataclass, field, fields
from typing import Any

import orjson

from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.history import KnownHistory


class BadTurnRequest(CopilotKitError):
    def __init__(self, message: str) -> None:
        super().__init__(message, code=ErrorCode.BAD_REQUEST)


@dataclass(slots=True)
class InputMessage:
    id: str
    kind: str  # text, action_execution, result, agent_state, image, document
    created_at: dt.datetime | None = None
    role: str = ""
    content: str = ""
    action_name: str = ""
    arguments: dict[str, Any] | None = None
    parent_message_id: str = ""
    action_execution_id: str = ""
    result: str = ""
    image_format: str = ""
    image_bytes: str = ""
    agent_state: dict[str, Any] | None = None
    # Passed check_turn_request. A known history's message (copilot_runtime/history) is the
    # same object in every request that re-sends it: checked once, not at every turn. Not part
    # of the message (equality, the worker's payload).
    checked: bool = field(default=False, compare=False, repr=False, metadata={"local": True})
    # Its JSON form in the worker's request (``turn_request_to_json``), made once per message
    # object, with the id it was made for (a message the client sent without one is given an
    # id when its turn is stored). A history message is not changed once parsed.
    json_form: tuple[str, bytes] | None = field(
        default=None, compare=False, repr=False, metadata={"local": True}
    )


@dataclass(slots=True)
class FrontendAction:
    name: str
    description: str
    parameters: dict[str, Any]
    available: str = "enabled"  # enabled, disabled, remote


@dataclass(slots=True)
class ForwardedParameters:
    model: str | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    temperature: float | None = None
    tool_choice: str | None = None
    tool_choice_function_name: str | None = None


@dataclass(slots=True)
class TurnRequest:
    thread_id: str | None
    messages: list[InputMessage]
    actions: list[FrontendAction] = field(default_factory=list)
    context: list[tuple[str, str]] = field(default_factory=list)
    forwarded: ForwardedParameters = field(default_factory=ForwardedParameters)
    request_type: str = "Chat"
    previous_run_id: str | None = None
    agent_name: str = "default"
    agent_session: dict[str, Any] | None = None
    agent_states: list[dict[str, Any]] = field(default_factory=list)
    meta_events: list[dict[str, Any]] = field(default_factory=list)
    extensions: dict[str, Any] | None = None
    properties: dict[str, Any] = field(default_factory=dict)
    frontend_url: str | None = None
    cloud: dict[str, Any] | None = None
    # The client's X-CopilotCloud-Public-API-Key header (guardrails may use Copilot Cloud).
    cloud_public_api_key: str = ""
    # Offer the model the shared state tools (engine/state_tools.py): v2 (AG-UI) turns only,
    # as the TypeScript runtime's built-in agent has them and its v1 GraphQL runtime does not.
    state_tools: bool = False
    # The agent's state when the turn starts: the latest persisted snapshot, overridden by
    # the state the client sent for this agent.
    state: dict[str, Any] = field(default_factory=dict)
    # The caller's Authorization and custom x-* headers (minus a deny-list), forwarded to
    # AG-UI agents as the TypeScript runtime does.
    forwarded_headers: dict[str, str] = field(default_factory=dict)
    # The stored thread's primary key once the turn is prepared (None before, and for a turn
    # that stores no thread, a suggestion): what an agent finds its thread's rows by, as a
    # client's thread id names a thread only together with its owner. Not in the run's task:
    # the worker takes it from the task's placement, which carries it already.
    thread_pk: int | None = field(default=None, compare=False, metadata={"local": True})
    # What this process knows of the history the request carries (copilot_runtime/history):
    # made where the request entered, resumed and added to by each layer's pass over the
    # messages. None: nothing known, and nothing kept for the next turn.
    history: KnownHistory | None = field(
        default=None, compare=False, repr=False, metadata={"local": True}
    )


def parse_datetime(raw: Any) -> dt.datetime | None:
    # Not cached: a re-sent history message is parsed once while its history is known
    # (copilot_runtime/history), and fromisoformat is cheap.
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return dt.datetime.fromisoformat(raw)  # Python 3.11 reads a trailing "Z" too
    except ValueError:
        return None


_REQUEST_FIELDS = tuple(f.name for f in fields(TurnRequest) if not f.metadata.get("local"))
_MESSAGE_FIELDS = tuple(f.name for f in fields(InputMessage) if not f.metadata.get("local"))
_ACTION_FIELDS = tuple(f.name for f in fields(FrontendAction))
_FORWARDED_FIELDS = tuple(f.name for f in fields(ForwardedParameters))


def turn_request_to_payload(request: TurnRequest) -> dict[str, Any]:
    """A JSON-ready form of the request, stored on the run for the process that executes it.

    Built field by field rather than with ``dataclasses.asdict``, which deep-copies every
    value: with the whole history in the request that was a quarter of a web process's CPU in
    the celery shape. The payload shares the request's dicts and lists: it is serialised at
    once, never changed.
    """
    payload = _payload_but_messages(request)
    payload["messages"] = [_message_payload(message) for message in request.messages]
    return payload


def _payload_but_messages(request: TurnRequest) -> dict[str, Any]:
    payload = {name: getattr(request, name) for name in _REQUEST_FIELDS if name != "messages"}
    payload["actions"] = [
        {name: getattr(action, name) for name in _ACTION_FIELDS} for action in request.actions
    ]
    payload["context"] = [list(entry) for entry in request.context]
    payload["forwarded"] = {name: getattr(request.forwarded, name) for name in _FORWARDED_FIELDS}
    return payload


def _message_payload(message: InputMessage) -> dict[str, Any]:
    payload = {name: getattr(message, name) for name in _MESSAGE_FIELDS}
    created = message.created_at
    payload["created_at"] = created.isoformat() if created else None
    return payload


def message_for_hooks(message: InputMessage) -> dict[str, Any]:
    """The message as the request hooks receive it (``RequestHookContext.input_messages``): a
    copy of its fields, without this process's own notes on it (``checked``, ``json_form``)."""
    return {name: copy.deepcopy(getattr(message, name)) for name in _MESSAGE_FIELDS}


def turn_request_to_json(request: TurnRequest) -> str:
    """``turn_request_to_payload`` as JSON text, the form a Celery task carries. Each history
    message is written once per message object, and re-sent ones (the same objects while the
    history is known, copilot_runtime/history) are copied in as written: the
    request's form then costs the new messages, not the thread. As text, the task's decoding
    (kombu's JSON with its object hook, in the worker's consumer and again in its pool) reads
    the history as one string instead of building each of its objects twice.

    Raises ``TypeError`` for a value orjson does not write (none that a parsed request holds;
    an integer over 64 bits put there by a hook): the payload form carries those.
    """
    # The messages first, as every version has written them.
    payload: dict[str, Any] = {
        "messages": [orjson.Fragment(_message_json(m)) for m in request.messages]
    }
    payload.update(_payload_but_messages(request))
    return orjson.dumps(payload).decode()


def message_json(message: InputMessage) -> bytes:
    """One message's JSON form in a task (``turn_request_to_json``'s), made once per message
    object: two messages with the same form are the same message, field by field and type by
    type (what copilot_runtime/runs/task_history.py compares histories by)."""
    return _message_json(message)


def _message_json(message: InputMessage) -> bytes:
    cached = message.json_form
    if cached is not None and cached[0] == message.id:
        return cached[1]
    written = orjson.dumps(_message_payload(message))
    message.json_form = (message.id, written)
    return written


def turn_request_from_json(text: str) -> TurnRequest:
    """The request a task carries, as ``turn_request_to_json`` wrote it, its messages each made
    anew (a worker takes those of a history it knows as it made them: runs/task_history.py)."""
    return turn_request_from_payload(orjson.loads(text))


def turn_request_from_payload(payload: dict[str, Any]) -> TurnRequest:
    return turn_request_with_messages(
        payload, [message_from_payload(raw) for raw in payload["messages"]]
    )


def turn_request_with_messages(
    payload: dict[str, Any], messages: list[InputMessage]
) -> TurnRequest:
    """The request of ``payload`` (``turn_request_to_payload``'s form) with ``messages``, made
    of its ``messages`` already."""
    data = dict(payload)
    data["messages"] = messages
    data["actions"] = [FrontendAction(**action) for action in payload["actions"]]
    data["context"] = [tuple(entry) for entry in payload["context"]]
    data["forwarded"] = ForwardedParameters(**payload["forwarded"])
    return TurnRequest(**data)


def message_from_payload(raw: dict[str, Any]) -> InputMessage:
    """One message of a payload (``turn_request_to_payload``'s ``messages``)."""
    return InputMessage(**{**raw, "created_at": parse_datetime(raw.get("created_at"))})


# What the store's columns hold (conversations/models.py): ids and names up to 255 characters,
# a run id up to 64; no text may hold a NUL character (PostgreSQL stores none).
ID_LENGTH = 255
RUN_ID_LENGTH = 64


def _check_text(value: str | None, field: str, *, limit: int | None = None) -> None:
    if not value:
        return
    if "\x00" in value:
        raise BadTurnRequest(f"{field} contains a NUL character, which cannot be stored.")
    if limit is not None and len(value) > limit:
        raise BadTurnRequest(f"{field} is longer than {limit} characters.")


def _message_suspect(message: InputMessage) -> bool:
    """Whether ``_check_message`` could refuse ``message`` (no string built on the way)."""
    for value in (
        message.id,
        message.parent_message_id,
        message.action_execution_id,
        message.action_name,
    ):
        if value and (len(value) > ID_LENGTH or "\x00" in value):
            return True
    role = message.role
    if role and (len(role) > 16 or "\x00" in role):
        return True
    for value in (message.content, message.result):
        if value and "\x00" in value:
            return True
    return message.arguments is not None or message.agent_state is not None


def _check_message(message: InputMessage, where: str) -> None:
    _check_text(message.id, f"{where}.id", limit=ID_LENGTH)
    _check_text(message.parent_message_id, f"{where}.parentMessageId", limit=ID_LENGTH)
    _check_text(message.action_execution_id, f"{where}.actionExecutionId", limit=ID_LENGTH)
    _check_text(message.action_name, f"{where} name", limit=ID_LENGTH)
    _check_text(message.role, f"{where}.role", limit=16)
    _check_text(message.content, f"{where}.content")
    _check_text(message.result, f"{where}.result")
    _check_json(message.arguments, f"{where}.arguments")
    _check_json(message.agent_state, f"{where}.state")


def _check_json(value: Any, field: str) -> None:
    """orjson (the store's writer) reads 1,024 levels of nesting but writes only 254: a value
    nested deeper would be accepted here and fail when stored."""
    if value is None:
        return
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        raise BadTurnRequest(
            f"{field} is nested too deeply (or holds a value JSON cannot represent)."
        ) from None


def check_turn_request(request: TurnRequest, *, run_id: str | None = None) -> None:
    """Refuse, naming the field, what the store could not keep: a client's mistake is a 400
    (or a GraphQL error), never a database error reported as an outage."""
    _check_text(request.thread_id, "threadId", limit=ID_LENGTH)
    _check_text(run_id, "runId", limit=RUN_ID_LENGTH)
    _check_text(request.agent_name, "agent name", limit=ID_LENGTH)
    for index, message in enumerate(request.messages):
        # The whole history comes with every request: the labels are built only for a
        # message that fails, and most messages pass the quick test.
        if message.checked:
            continue
        if _message_suspect(message):
            _check_message(message, f"messages[{index}]")
        message.checked = True
    for index, action in enumerate(request.actions):
        _check_text(action.name, f"actions[{index}].name", limit=ID_LENGTH)
        _check_json(action.parameters, f"actions[{index}].parameters")
    for index, entry in enumerate(request.agent_states):
        state = entry.get("state") if isinstance(entry, dict) else None
        if isinstance(state, str):  # v1 sends each agent's state as JSON text
            # An unreadable state is ignored (the stored one is used).
            with contextlib.suppress(orjson.JSONDecodeError):
                _check_json(orjson.loads(state), f"agentStates[{index}].state")
    _check_json(request.state, "state")
    _check_json(request.agent_states, "agentStates")
    _check_json(request.agent_session, "agentSession")
    _check_json(request.properties, "properties")
    _check_json(request.extensions, "extensions")
    _check_json(request.meta_events, "metaEvents")
    _check_json(request.cloud, "cloud")
