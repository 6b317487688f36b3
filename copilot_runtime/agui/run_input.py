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
from dataclasses import dataclass, field
from typing import Any

import orjson

from copilot_runtime.agui.generation import resume_answer
from copilot_runtime.agui.media import MEDIA_PARTS, media_part, media_rows, new_turn_media_bytes
from copilot_runtime.conf import runtime_setting
from copilot_runtime.events.reasoning import thinking_block
from copilot_runtime.events.request import (
    ForwardedParameters,
    FrontendAction,
    InputMessage,
    TurnRequest,
)
from copilot_runtime.history import HISTORIES, V2, BodyRead, KnownHistory

# Run ids are stored as the run's primary key (64 characters) and appear in URLs and logs.
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
MAX_THREAD_ID_LENGTH = 255

_MESSAGE_ROLES = ("developer", "system", "assistant", "user", "tool", "activity", "reasoning")
_TEXT_PART = "text"
_PART_TYPES = (_TEXT_PART, *MEDIA_PARTS)


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
    # while checking it, or known with its history); None for the others.
    own_rows: list[tuple[InputMessage, ...] | None] | None = None
    # What this process knows of ``messages`` (copilot_runtime/history), for the request.
    history: KnownHistory | None = None


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
                if self.record(part, part_path) is not None:
                    self.content_part(part, part_path, part_index)
        if role == "tool":
            self.string(message.get("toolCallId"), (*path, "toolCallId"))
        elif role == "reasoning":
            self.string(message.get("encryptedValue"), (*path, "encryptedValue"), optional=True)
        elif role == "activity":
            self.string(message.get("activityType"), (*path, "activityType"))

    def content_part(self, part: dict[str, Any], path: tuple[str | int, ...], index: int) -> None:
        part_type = part.get("type")
        if not isinstance(part_type, str):
            self.fail((*path, "type"), "Required")
        elif part_type not in _PART_TYPES:
            self.fail((*path, "type"), f"Invalid discriminator value. Expected {_PART_TYPES}")
        elif part_type == _TEXT_PART:
            self.string(part.get("text"), (*path, "text"))
        else:
            # Refused here, before anything is stored or sent: a part no model takes would
            # otherwise be dropped without a word.
            taken = media_part(part=part, index=index)
            if isinstance(taken, str):
                self.fail(path, f"{part_type} part: {taken}")

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


def agui_history(
    body: Any, owner_id: int | None, read: BodyRead | None = None, *, keep: bool = True
) -> KnownHistory | None:
    """The known history of a run input's messages, entering with its request (``read``: what
    the request's bytes told of it; ``keep``: see ``HistoryCache.enter``); None for an input
    without a messages array."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return None
    thread_id = body.get("threadId")
    thread = (owner_id, thread_id) if isinstance(thread_id, str) and thread_id else None
    return HISTORIES.enter(V2, messages, thread=thread, read=read, keep=keep)


def run_input_parse(raw: Any, history: KnownHistory | None = None) -> RunInput:
    """Validate a ``RunAgentInput``; raises ``InvalidRunInput`` listing every issue. The
    messages of ``history`` (``agui_history``) that passed before are not checked again."""
    checker = _Checker()
    body = checker.record(raw, ())
    if body is None:
        raise InvalidRunInput(checker.issues)
    checker.string(body.get("threadId"), ("threadId",))
    checker.string(body.get("runId"), ("runId",))
    checker.string(body.get("parentRunId"), ("parentRunId",), optional=True)
    messages = checker.array(body.get("messages"), ("messages",))
    if history is not None and history.raws is not messages:
        history = None
    # The earlier turns' messages passed before: their rows are taken as they were made.
    start, stop, known = history.reuse(_CHECKED, messages) if history else (0, 0, [])
    own_rows = [_checked_rows(checker, messages[index], index) for index in range(start)]
    own_rows += known
    own_rows += [_checked_rows(checker, messages[i], i) for i in range(stop, len(messages))]
    if history is not None and not checker.issues:
        history.keep_each(_CHECKED, messages, own_rows, start, stop)
    media_limit = int(runtime_setting("MAX_MEDIA_REQUEST_BYTES"))
    media_bytes = new_turn_media_bytes(messages=messages)
    if media_limit and media_bytes > media_limit:
        checker.fail(
            ("messages",),
            f"The new messages' images and documents are {media_bytes} bytes, over the "
            f"{media_limit}-byte limit per request",
        )
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
        history=history,
    )


def _checked_rows(checker: _Checker, message: Any, index: int) -> tuple[InputMessage, ...] | None:
    """Checks ``message``; its own rows when it passed and they follow from it alone."""
    before = len(checker.issues)
    checker.message(message, index)
    if len(checker.issues) != before or message["role"] not in _OWN_ROWS_ROLES:
        return None
    rows = _own_rows(message)
    # A row without an id gets one when stored (conversations/store): made anew each time.
    return rows if all(row.id for row in rows) else None


# --- AG-UI messages -> stored rows ------------------------------------------------------------


def _arguments(text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_value": value}


def _user_inputs(message: dict[str, Any]) -> list[InputMessage]:
    content = message["content"]
    if isinstance(content, str):
        return [InputMessage(id=message["id"], kind="text", role="user", content=content)]
    texts = [part.get("text") or "" for part in content if part.get("type") == _TEXT_PART]
    inputs = [InputMessage(id=message["id"], kind="text", role="user", content="\n".join(texts))]
    return inputs + media_rows(message=message)


# Roles whose rows depend on the message alone (a tool result also needs its call's name).
_OWN_ROWS_ROLES = frozenset({"user", "system", "developer", "assistant"})
# The forms of a known history (copilot_runtime/history) made here, for the next request that
# re-sends its messages: per message that passed the checks, the rows it is stored as when
# they follow from it alone (read-only once made);
_CHECKED = "agui.checked"
# input_messages_from_agui's rows and tool call names after the messages;
_ROWS = "agui.rows"
# the converted messages without the system and developer ones.
_WITHOUT_SYSTEM = "agui.without_system"


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
    history: KnownHistory | None = None,
) -> list[InputMessage]:
    """The stored-row view of an AG-UI history (activity messages, and reasoning messages but
    signed thinking, are the frontend's own and are left out); ``own_rows`` are the rows
    ``run_input_parse`` made or knew for the messages, made here where missing."""
    # The earlier turns' messages come back as the same objects: their rows are reused.
    done, kept = history.resume(_ROWS, messages) if history is not None else (0, None)
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
        elif role == "reasoning":
            # Kept only when it replays signed thinking to Anthropic (events/reasoning.py);
            # any other reasoning is the frontend's own, as in the TypeScript runtime.
            sealed = message.get("encryptedValue")
            if thinking_block(content=message["content"], encrypted_value=sealed) is not None:
                inputs.append(
                    InputMessage(
                        id=message["id"],
                        kind="reasoning",
                        role="reasoning",
                        content=message["content"],
                        result=sealed,
                    )
                )
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
    if history is not None and all(row.id for row in inputs[len(kept[0]) if kept else 0 :]):
        history.keep(_ROWS, messages, (tuple(inputs), call_names))
    return inputs


def without_system_messages(
    messages: list[InputMessage], history: KnownHistory | None = None
) -> list[InputMessage]:
    """The history without the client's system and developer messages (what reaches a built-in
    agent's model on v2 unless it sets ``forward_system_messages``). A history re-sent with
    the next turn is filtered from where the last turn's stopped (``history``)."""
    done, kept = history.resume(_WITHOUT_SYSTEM, messages) if history else (0, None)
    remaining = [
        message
        for message in (messages[done:] if done else messages)
        if not (message.kind == "text" and message.role in ("system", "developer"))
    ]
    filtered = remaining if kept is None else [*kept, *remaining]
    if history is not None:
        history.keep(_WITHOUT_SYSTEM, messages, tuple(filtered))
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
        answer = resume_answer(run_input.resume)
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
        messages=input_messages_from_agui(
            run_input.messages, run_input.own_rows, run_input.history
        ),
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
        history=run_input.history,
        state_tools=True,
    )
