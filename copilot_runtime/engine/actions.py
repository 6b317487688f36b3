"""Server-side actions: Python callables the engine executes itself.

Register them by dotted path in ``COPILOT_RUNTIME["ACTIONS"]`` (or the environment variable
``COPILOT_RUNTIME_ACTIONS`` as a comma-separated list). A path may name a ``ServerAction``
(built with the ``server_action`` decorator, to give a description and a JSON schema) or a
plain function, whose name, docstring and annotated parameters are used. Sync and async
functions both work. A failing action does not fail the turn: its result is the error,
encoded as the TypeScript runtime encodes it, and the model carries on.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import orjson
from asgiref.sync import sync_to_async
from django.utils.module_loading import import_string

from copilot_runtime.conf import runtime_setting
from copilot_runtime.errors import CopilotKitError, ErrorCode

_JSON_TYPES = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


@dataclass(frozen=True)
class ServerAction:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[..., Any]
    # Never executed by the loop until the client approved the call (see engine/approvals.py).
    needs_approval: bool = False

    def tool_definition(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True)
class ActionOutcome:
    result: str
    is_error: bool


def server_action(
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    needs_approval: bool = False,
) -> Callable[[Callable[..., Any]], ServerAction]:
    """Declare a server action with an explicit name, description and JSON schema."""

    def wrap(function: Callable[..., Any]) -> ServerAction:
        return ServerAction(
            name=name or function.__name__,
            description=description or inspect.getdoc(function) or "",
            parameters=parameters or _schema_from_signature(function),
            handler=function,
            needs_approval=needs_approval,
        )

    return wrap


def _schema_from_signature(function: Callable[..., Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        json_type = _JSON_TYPES.get(parameter.annotation)
        properties[parameter.name] = {"type": json_type} if json_type else {}
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
    return {"type": "object", "properties": properties, "required": required}


def action_from_object(target: Any) -> ServerAction:
    if isinstance(target, ServerAction):
        return target
    if callable(target):
        return server_action()(target)
    raise CopilotKitError(
        f"{target!r} is neither a ServerAction nor a callable.",
        code=ErrorCode.CONFIGURATION_ERROR,
    )


def server_actions_from_settings() -> dict[str, ServerAction]:
    """The configured server actions by name (configuration errors surface clearly)."""
    actions: dict[str, ServerAction] = {}
    for path in runtime_setting("ACTIONS") or []:
        try:
            target = import_string(path) if isinstance(path, str) else path
        except ImportError as exc:
            raise CopilotKitError(
                f"The server action '{path}' in COPILOT_RUNTIME['ACTIONS'] cannot be imported.",
                code=ErrorCode.CONFIGURATION_ERROR,
            ) from exc
        action = action_from_object(target)
        actions[action.name] = action
    for name in runtime_setting("APPROVAL_REQUIRED_ACTIONS") or []:
        if name in actions:
            actions[name] = replace(actions[name], needs_approval=True)
    return actions


def encode_result(value: Any) -> str:
    """Results as the TypeScript runtime encodes them: strings as-is, the rest as JSON."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=str).decode()


def encode_error(code: str, message: str) -> str:
    return orjson.dumps({"error": {"code": code, "message": message}, "result": ""}).decode()


async def action_execute(*, action: ServerAction, raw_arguments: str) -> ActionOutcome:
    """Run one server action with the model's (JSON text) arguments."""
    try:
        arguments = orjson.loads(raw_arguments) if raw_arguments.strip() else {}
    except orjson.JSONDecodeError:
        return ActionOutcome(
            encode_error("INVALID_ARGUMENTS", "The arguments are not valid JSON."), True
        )
    if not isinstance(arguments, dict):
        return ActionOutcome(
            encode_error("INVALID_ARGUMENTS", "The arguments must be a JSON object."), True
        )
    try:
        inspect.signature(action.handler).bind(**arguments)
    except TypeError as exc:
        return ActionOutcome(encode_error("INVALID_ARGUMENTS", str(exc)), True)
    try:
        if inspect.iscoroutinefunction(action.handler):
            value = await action.handler(**arguments)
        else:
            value = await sync_to_async(action.handler, thread_sensitive=False)(**arguments)
    except Exception as exc:  # the action's own failure goes back to the model
        return ActionOutcome(encode_error("HANDLER_ERROR", str(exc) or type(exc).__name__), True)
    return ActionOutcome(encode_result(value), False)
