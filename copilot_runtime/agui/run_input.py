"""``RunAgentInput``: validated as ``@ag-ui/core``'s schema does, converted to a ``TurnRequest``.

AG-UI messages become the same rows v1 stores (one per text message, per tool call and per tool
result), so a thread can move between the two protocols: an assistant message's ``toolCalls``
become ``action_execution`` inputs whose parent is the assistant message, a ``tool`` message a
``result`` input. ``tools`` are the frontend actions, ``context`` the readable context,
``forwardedProps`` the request's properties (and model parameters the frontend forces, such as
the suggestion engine's ``toolChoice``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from copilot_runtime.events.recent import PrefixMemo, Recent, first_input_id
from copilot_runtime.events.request import (
    ForwardedParameters,
    FrontendAction,
    InputMessage,
    TurnRequest,
)

# Run ids are stored as the run's primary key (64 characters) and appear in URLs and logs.
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
MAX_THREAD_ID_LENGTH = 255

_MESSAGE_ROLES = ("developer", "system", "assistant", "user", "tool", "activity", "reasoning")
_TEXT_PART = "text"
_IMAGE_PART = "image"


@dataclass(frozen=True)
class Issue:
    path: tuple[str | int, ...]
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"path": list(self.path), "message": self.message}


@dataclass
class RunInput:
    """A validated ``RunAgentInput``; ``raw`` is the input as sent (echoed in RUN_STARTED)."""

    thread_id: str
    run_id: str
    raw: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    context: list[dict[str, Any]] = field(default_factory=list)
    state: Any = None
    forwarded_props: Any = None
    parent_run_id: str | None = None
    resume: list[Any] | None = None
    # Per message, the rows it is stored as when they follow from the message alone (made
    # while checking it, or remembered with it); None for the others.
    own_rows: list[tuple[InputMessage, ...] | None] | None = None


class InvalidRunInput(ValueError):
    def __init__(self, issues: list[Issue]) -> None:
        super().__init__(issues_text(issues))
        self.issues = issues


def issues_text(issues: list[Issue]) -> str:
    """The ``details`` string of a 400: the issues as JSON, like a ZodError's message."""
    return orjson.dumps([issue.as_dict() for issue in issues]).decode()


class _Checker:
    def __init__(self) -> None:
        self.issues: list[Issue] = []

    def fail(self, path: tuple[str | int, ...], message: str) -> None:
        self.issues.append(Issue(path, message))

    def string(self, value: Any, path: tuple[str | int, ...], *, optional: bool = False) -> bool:
        if value is None and optional:
            return True
        if not isinstance(value, str):
            self.fail(path, "Required" if value is None else "Expected string")
            return False
        return True

    def array(self, value: Any, path: tuple[str | int, ...]) -> list[Any]:
        if not isinstance(value, list):
            self.fail(path, "Required" if value is None else "Expected array")
            return []
        return value

    def record(self, value: Any, path: tuple[str | int, ...]) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.fail(path, "Required" if value is None else "Expected object")
            return None
        return value

    def message(self, raw: Any, index: int) -> None:
        path: tuple[str | int, ...] = ("messages", index)
        message = self.record(raw, path)
        if message is None:
            return
        self.string(message.get("id"), (*path, "id"))
        role = message.get("role")
        if role not in _MESSAGE_ROLES:
            self.fail((*path, "role"), f"Invalid discriminator value. Expected {_MESSAGE_ROLES}")
            return
        content = message.get("content")
        if role in ("developer", "system", "tool", "reasoning"):
            self.string(content, (*path, "content"))
        elif role == "assistant":
            self.string(content, (*path, "content"), optional=True)
            calls = message.get("toolCalls")
            if calls is not None:
                for call_index, call in enumerate(self.array(calls, (*path, "toolCalls"))):
                    self.tool_call(call, (*path, "toolCalls", call_index))
        elif role == "user" and not isinstance(content, str):
            for part_index, part in enumerate(self.array(content, (*path, "content"))):
                part_path = (*path, "content", part_index)
                if self.record(part, part_path) is not None and not isinstance(
                    part.get("type"), str
                ):
                    self.fail((*part_path, "type"), "Required")
        if role == "tool":
            self.string(message.get("toolCallId"), (*path, "toolCallId"))
        elif role == "activity":
            self.string(message.get("activityType"), (*path, "activityType"))

    def tool_call(self, raw: Any, path: tuple[str | int, ...]) -> None:
        call = self.record(raw, path)
        if call is None:
            return
        self.string(call.get("id"), (*path, "id"))
        if call.get("type") != "function":
            self.fail((*path, "type"), 'Invalid literal value, expected "function"')
        function = self.record(call.get("function"), (*path, "function"))
        if function is not None:
            self.string(function.get("name"), (*path, "function", "name"))
            self.string(function.get("arguments"), (*path, "function", "arguments"))


def run_input_parse(raw: Any) -> RunInput:
    """Validate a ``RunAgentInput``; raises ``InvalidRunInput`` listing every issue."""
    checker = _Checker()
    body = checker.record(raw, ())
    if body is None:
        raise InvalidRunInput(checker.issues)
    checker.string(body.get("threadId"), ("threadId",))
    checker.string(body.get("runId"), ("runId",))
    checker.string(body.get("parentRunId"), ("parentRunId",), optional=True)
    messages = checker.array(body.get("messages"), ("messages",))
    # The earlier turns' messages, recognised together (see Recent.history_prefix).
    known, remembered = _CHECKED_MESSAGES.history_prefix(messages)
    own_rows = remembered[:known]
    for index, message in enumerate(messages[known:], known):
        key = message.get("id") if isinstance(message, dict) else None
        found, rows = _CHECKED_MESSAGES.recall(key, message)
        if not found:  # else this very message passed before (the history comes back)
            before = len(checker.issues)
            checker.message(message, index)
            if len(checker.issues) == before:
                rows = _own_rows(message) if message["role"] in _OWN_ROWS_ROLES else None
                _CHECKED_MESSAGES.keep(key, message, rows)
        own_rows.append(rows)
    if not checker.issues:
        _CHECKED_MESSAGES.keep_history(messages, own_rows, known=known, rememberable=_rememberable)
    tools = checker.array(body.get("tools"), ("tools",))
    for index, tool in enumerate(tools):
        if checker.record(tool, ("tools", index)) is not None:
            checker.string(tool.get("name"), ("tools", index, "name"))
            checker.string(tool.get("description"), ("tools", index, "description"))
    context = checker.array(body.get("context"), ("context",))
    for index, entry in enumerate(context):
        if checker.record(entry, ("context", index)) is not None:
            checker.string(entry.get("description"), ("context", index, "description"))
            checker.string(entry.get("value"), ("context", index, "value"))
    if body.get("resume") is not None:
        checker.array(body.get("resume"), ("resume",))
    thread_id, run_id = body.get("threadId"), body.get("runId")
    if isinstance(thread_id, str) and not 0 < len(thread_id) <= MAX_THREAD_ID_LENGTH:
        checker.fail(("threadId",), f"Must be 1 to {MAX_THREAD_ID_LENGTH} characters")
    if isinstance(run_id, str) and not RUN_ID_PATTERN.match(run_id):
        checker.fail(
            ("runId",),
            "Must be 1 to 64 characters: letters, digits, '.', '_', ':' or '-', "
            "starting with a letter or a digit",
        )
    if checker.issues:
        raise InvalidRunInput(checker.issues)
    return RunInput(
        thread_id=thread_id,
        run_id=run_id,
        raw=body,
        messages=messages,
        tools=tools,
        context=context,
        state=body.get("state"),
        forwarded_props=body.get("forwardedProps"),
        parent_run_id=body.get("parentRunId"),
        resume=body.get("resume"),
        own_rows=own_rows,
    )


# --- AG-UI messages -> stored rows ------------------------------------------------------------


def _arguments(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_value": value}


def _image_format(mime_type: str) -> str:
    return mime_type.split("/", 1)[1] if "/" in mime_type else mime_type


def _user_inputs(message: dict[str, Any]) -> list[InputMessage]:
    content = message["content"]
    if isinstance(content, str):
        return [InputMessage(id=message["id"], kind="text", role="user", content=content)]
    texts = [part.get("text") or "" for part in content if part.get("type") == _TEXT_PART]
    inputs = [InputMessage(id=message["id"], kind="text", role="user", content="\n".join(texts))]
    for index, part in enumerate(content):
        source = part.get("source") or {}
        if part.get("type") == _IMAGE_PART and source.get("type") == "data":
            inputs.append(
                InputMessage(
                    id=f"{message['id']}-image-{index}",
                    kind="image",
                    role="user",
                    image_format=_image_format(str(source.get("mimeType") or "")),
                    image_bytes=str(source.get("value") or ""),
                    parent_message_id=message["id"],
                )
            )
    return inputs


# Roles whose rows depend on the message alone (a tool result also needs its call's name).
_OWN_ROWS_ROLES = frozenset({"user", "system", "developer", "assistant"})
# Messages that passed the checks, with the rows they convert to when those follow from the
# message alone (see copilot_runtime/events/recent.py; the rows are read-only once made). One
# look-up per history message and turn: the history comes back with every request.
_CHECKED_MESSAGES: Recent[tuple[InputMessage, ...] | None] = Recent()
# input_messages_from_agui's rows and tool call names after a history's messages.
_ROWS_MADE: PrefixMemo[tuple[tuple[InputMessage, ...], dict[str, str]]] = PrefixMemo()


def _rememberable(message: Any) -> bool:
    # A message without an id is checked anew every time, as by the look-up of one message.
    if type(message) is not dict:
        return False
    message_id = message.get("id")
    return type(message_id) is str and message_id != ""


def _own_rows(message: dict[str, Any]) -> tuple[InputMessage, ...]:
    role = message["role"]
    if role == "user":
        return tuple(_user_inputs(message))
    if role in ("system", "developer"):
        return (InputMessage(id=message["id"], kind="text", role=role, content=message["content"]),)
    rows: list[InputMessage] = []
    content = message.get("content") or ""
    if content:
        rows.append(InputMessage(id=message["id"], kind="text", role="assistant", content=content))
    for call in message.get("toolCalls") or []:
        rows.append(
            InputMessage(
                id=call["id"],
                kind="action_execution",
                role="assistant",
                action_name=call["function"]["name"],
                arguments=_arguments(call["function"]["arguments"]),
                parent_message_id=message["id"],
            )
        )
    return tuple(rows)


def input_messages_from_agui(
    messages: list[dict[str, Any]],
    own_rows: list[tuple[InputMessage, ...] | None] | None = None,
) -> list[InputMessage]:
    """The stored-row view of an AG-UI history (activity and reasoning messages are the
    frontend's own and are left out); ``own_rows`` are the rows ``run_input_parse`` made or
    remembered for the messages, made here where missing."""
    # The earlier turns' messages come back as the same objects: their rows are reused.
    done, kept = _ROWS_MADE.resume(messages)
    inputs: list[InputMessage] = list(kept[0]) if kept is not None else []
    call_names: dict[str, str] = dict(kept[1]) if kept is not None else {}
    for index in range(done, len(messages)):
        message = messages[index]
        role = message["role"]
        if role in _OWN_ROWS_ROLES:
            rows = own_rows[index] if own_rows is not None else None
            inputs.extend(_own_rows(message) if rows is None else rows)
            if role == "assistant":
                for call in message.get("toolCalls") or ():
                    call_names[call["id"]] = call["function"]["name"]
        elif role == "tool":
            call_id = message["toolCallId"]
            inputs.append(
                InputMessage(
                    id=message["id"],
                    kind="result",
                    role="tool",
                    action_name=call_names.get(call_id, ""),
                    action_execution_id=call_id,
                    result=message["content"],
                )
            )
    # A row without an id gets one when stored (conversations/store): never shared.
    if all(row.id for row in inputs[len(kept[0]) if kept is not None else 0 :]):
        _ROWS_MADE.keep(messages, (tuple(inputs), call_names))
    return inputs


def _stored_ids(message: dict[str, Any]) -> list[str]:
    """The ids of the rows a message of the history is stored as (none for roles the thread
    does not keep)."""
    role = message["role"]
    if role in ("user", "tool"):
        return [message["id"]]
    if role == "assistant":
        ids = [message["id"]] if message.get("content") else []
        ids.extend(call["id"] for call in message.get("toolCalls") or [])
        return ids
    return []


@dataclass(frozen=True, slots=True)
class _Echoes:
    """Which messages of a history RUN_STARTED echoes, decided for the next turn that re-sends
    them: by position, those echoed whatever is new (``always``), and, by each id they are
    stored under, those echoed when one of their ids is new (no id under two messages)."""

    always: tuple[int, ...]
    by_id: dict[str, int]


_ECHOES: PrefixMemo[_Echoes] = PrefixMemo()


def echoed_input(raw: dict[str, Any], new_message_ids: Iterable[str]) -> dict[str, Any]:
    """The run input RUN_STARTED echoes: only the messages new to the thread, as the TypeScript
    runtime sends it (the client already has the rest). Messages the thread does not store
    (system, developer, activity, reasoning) cannot be told apart and are echoed.

    A history re-sent with the next turn is the same message objects (events/recent.py): its
    earlier messages are decided by looking up the new ids, not by a pass over them."""
    new = set(new_message_ids)
    messages = raw.get("messages") or []
    done, kept = _ECHOES.resume(messages)
    always = list(kept.always) if kept is not None else []
    by_id = dict(kept.by_id) if kept is not None else {}
    echoed = [index for message_id in new if (index := by_id.get(message_id)) is not None]
    unique = True
    for index in range(done, len(messages)):
        message = messages[index]
        role = message["role"]
        if role == "user" or (role == "assistant" and not message.get("toolCalls")):
            # Most of a history is user and assistant texts: decided without an id list.
            if role == "assistant" and not message.get("content"):
                always.append(index)
                echoed.append(index)
                continue
            ids = [message["id"]]
        else:
            ids = _stored_ids(message)
            if not ids:
                always.append(index)
                echoed.append(index)
                continue
        if any(message_id in new for message_id in ids):
            echoed.append(index)
        for message_id in ids:
            unique = unique and message_id not in by_id
            by_id[message_id] = index
    if unique:
        _ECHOES.keep(messages, _Echoes(always=tuple(always), by_id=by_id))
    if kept is not None:
        echoed.extend(kept.always)
    chosen = set(echoed)  # a message with two new ids is found twice
    if len(chosen) == len(messages):
        return raw
    return {**raw, "messages": [messages[index] for index in sorted(chosen)]}


_WITHOUT_SYSTEM: PrefixMemo[tuple[InputMessage, ...]] = PrefixMemo(first_id=first_input_id)


def without_system_messages(messages: list[InputMessage]) -> list[InputMessage]:
    """The history without the client's system and developer messages (what reaches a built-in
    agent's model on v2 unless it sets ``forward_system_messages``). A history re-sent with
    the next turn is filtered from where the last turn's stopped (``PrefixMemo``)."""
    done, kept = _WITHOUT_SYSTEM.resume(messages)
    remaining = [
        message
        for message in (messages[done:] if done else messages)
        if not (message.kind == "text" and message.role in ("system", "developer"))
    ]
    filtered = remaining if kept is None else [*kept, *remaining]
    _WITHOUT_SYSTEM.keep(messages, tuple(filtered))
    return filtered


# --- forwardedProps -> model parameters -------------------------------------------------------


def _forwarded_parameters(props: dict[str, Any]) -> ForwardedParameters:
    tool_choice = props.get("toolChoice")
    choice: str | None = None
    function_name: str | None = None
    if isinstance(tool_choice, str):
        choice = tool_choice
    elif isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        choice = "function"
        function_name = (tool_choice.get("function") or {}).get("name")
    max_tokens = props.get("maxTokens")
    temperature = props.get("temperature")
    stop = props.get("stop")
    model = props.get("model")
    return ForwardedParameters(
        model=model if isinstance(model, str) and model else None,
        max_tokens=max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None,
        stop=[str(item) for item in stop] if isinstance(stop, list) else None,
        temperature=float(temperature) if isinstance(temperature, int | float) else None,
        tool_choice=choice,
        tool_choice_function_name=function_name,
    )


def _interrupt_answers(run_input: RunInput, props: dict[str, Any]) -> list[dict[str, Any]]:
    """An answer to a pending interrupt, in the shape v1 clients send it (``metaEvents``):
    ``resume`` (AG-UI's own field, which wins) or ``forwardedProps.command.resume``. The value
    is left empty: the engine takes it from the persisted interrupt."""
    answer: Any = None
    if run_input.resume:
        first = run_input.resume[0]
        answer = first.get("payload", first.get("value")) if isinstance(first, dict) else first
    elif isinstance(props.get("command"), dict) and "resume" in props["command"]:
        answer = props["command"]["resume"]
    if answer is None:
        return []
    response = answer if isinstance(answer, str) else orjson.dumps(answer).decode()
    return [{"name": "LangGraphInterruptEvent", "value": "", "response": response}]


def turn_request_from_run_input(
    run_input: RunInput, *, agent_name: str, frontend_url: str | None = None
) -> TurnRequest:
    props = run_input.forwarded_props if isinstance(run_input.forwarded_props, dict) else {}
    state = run_input.state
    agent_states = (
        [{"agentName": agent_name, "state": orjson.dumps(state).decode()}]
        if isinstance(state, dict) and state
        else []
    )
    return TurnRequest(
        thread_id=run_input.thread_id,
        meta_events=_interrupt_answers(run_input, props),
        messages=input_messages_from_agui(run_input.messages, run_input.own_rows),
        actions=[
            FrontendAction(
                name=tool["name"],
                description=tool["description"],
                parameters=tool.get("parameters")
                if isinstance(tool.get("parameters"), dict)
                else {},
            )
            for tool in run_input.tools
        ],
        context=[(entry["description"], entry["value"]) for entry in run_input.context],
        forwarded=_forwarded_parameters(props),
        previous_run_id=run_input.parent_run_id,
        agent_name=agent_name,
        agent_states=agent_states,
        properties=dict(props),
        frontend_url=frontend_url,
    )
