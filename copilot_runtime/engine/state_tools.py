"""The shared state tools the chat engine offers on v2 (AG-UI) turns, as the TypeScript runtime's
built-in agent does: ``AGUISendStateSnapshot`` replaces the application's state,
``AGUISendStateDelta`` edits it with JSON Patch operations. The client's state is shown to the
model in the system prompt, in the same words.

Names, descriptions, parameter schemas and the prompt text are the TypeScript runtime's (1.75)
verbatim: a prompt written against that runtime behaves the same here. An agent turns them off
with ``AGENTS[name]["state_tools"] = False``. v1 (GraphQL) turns never get them (TS 1.10.6 has
none).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import jsonpointer
import orjson

from copilot_runtime.conf import runtime_setting
from copilot_runtime.engine.actions import encode_error
from copilot_runtime.events.state_patch import JsonPatchError, apply_patch

SNAPSHOT_TOOL = "AGUISendStateSnapshot"
DELTA_TOOL = "AGUISendStateDelta"
STATE_TOOL_NAMES = frozenset((SNAPSHOT_TOOL, DELTA_TOOL))
_DRAFT_07 = "http://json-schema.org/draft-07/schema#"
_PATCH_OPS = ("add", "replace", "remove")

# As the AI SDK serialises the TypeScript runtime's zod schemas: ``snapshot`` is z.any(), which
# zod 3 treats as optional, so it is not required.
SNAPSHOT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"snapshot": {"description": "The complete new state object"}},
    "additionalProperties": False,
    "$schema": _DRAFT_07,
}
DELTA_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "delta": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "op": {
                        "type": "string",
                        "enum": list(_PATCH_OPS),
                        "description": "The operation to perform",
                    },
                    "path": {
                        "type": "string",
                        "description": "JSON Pointer path (e.g., '/foo/bar')",
                    },
                    "value": {
                        "description": "The value to set. Required for 'add' and 'replace' "
                        "operations, ignored for 'remove'."
                    },
                },
                "required": ["op", "path"],
                "additionalProperties": False,
            },
            "description": "Array of JSON Patch operations",
        }
    },
    "required": ["delta"],
    "additionalProperties": False,
    "$schema": _DRAFT_07,
}
STATE_TOOL_DEFINITIONS: tuple[dict[str, Any], ...] = (
    {
        "type": "function",
        "function": {
            "name": SNAPSHOT_TOOL,
            "description": "Replace the entire application state with a new snapshot",
            "parameters": SNAPSHOT_PARAMETERS,
        },
    },
    {
        "type": "function",
        "function": {
            "name": DELTA_TOOL,
            "description": (
                "Apply incremental updates to application state using JSON Patch operations"
            ),
            "parameters": DELTA_PARAMETERS,
        },
    },
)

_STATE_HEADING = (
    "\n## Application State\n"
    "This is state from the application that you can edit by calling AGUISendStateSnapshot "
    "or AGUISendStateDelta.\n"
)


def state_tools_enabled(*, agent_name: str) -> bool:
    """On unless the agent's settings say ``"state_tools": False``."""
    agent = (runtime_setting("AGENTS") or {}).get(agent_name) or {}
    return agent.get("state_tools", True) is not False


def _pretty(value: Any) -> str:
    # JSON.stringify(state, null, 2): two-space indent, ", " never (one item per line), and
    # non-ASCII kept as is.
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def state_prompt_section(state: Any) -> str | None:
    """The system prompt's state section, or None for a state TS leaves out (null, ``{}``,
    ``[]``)."""
    if state is None or (isinstance(state, dict | list) and not state):
        return None
    return f"{_STATE_HEADING}```json\n{_pretty(state)}\n```\n"


def with_state_prompt(*, conversation: list[dict[str, Any]], state: Any) -> list[dict[str, Any]]:
    """``conversation`` with the state section appended to its leading system prompt (TS joins
    prompt, context and state into one system message), or as a system message of its own
    first when there is none. Entries are replaced, never changed: they may be shared."""
    section = state_prompt_section(state)
    if section is None:
        return conversation
    lead = 0
    while lead < len(conversation) and conversation[lead].get("role") in ("system", "developer"):
        lead += 1
    if lead == 0:
        return [{"role": "system", "content": section}, *conversation]
    last = conversation[lead - 1]
    content = last.get("content")
    if not isinstance(content, str):
        return [*conversation[:lead], {"role": "system", "content": section}, *conversation[lead:]]
    return [*conversation[: lead - 1], {**last, "content": content + section}, *conversation[lead:]]


@dataclass(frozen=True, slots=True)
class StateToolOutcome:
    """A state tool call's result for the model and client, and the state it leaves (None:
    unchanged). ``delta`` is set for a patch, to be sent as a ``STATE_DELTA``."""

    result: str
    is_error: bool = False
    state: dict[str, Any] | None = None
    delta: list[dict[str, Any]] | None = None


def _failed(message: str) -> StateToolOutcome:
    return StateToolOutcome(result=encode_error("INVALID_STATE_UPDATE", message), is_error=True)


def _arguments(raw: str) -> dict[str, Any] | None:
    try:
        parsed = orjson.loads(raw or "{}")
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _operations(raw: Any) -> list[dict[str, Any]] | str:
    """The patch's operations with only the keys the schema allows (as zod strips the others),
    or why they are invalid."""
    if not isinstance(raw, list):
        return "delta must be an array of JSON Patch operations"
    operations = []
    for index, op in enumerate(raw):
        if not isinstance(op, dict) or op.get("op") not in _PATCH_OPS:
            return f"delta[{index}].op must be one of add, replace, remove"
        if not isinstance(op.get("path"), str):
            return f"delta[{index}].path must be a JSON Pointer string"
        kept = {"op": op["op"], "path": op["path"]}
        if "value" in op:
            kept["value"] = op["value"]
        operations.append(kept)
    return operations


def _with_created_arrays(state: Any, operations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Appending to a missing array creates it first, as TS's state normaliser does
    (``add /todos/-`` on a state without ``todos``)."""
    out: list[dict[str, Any]] = []
    document = state
    for op in operations:
        added = [op]
        if op["op"] == "add" and op["path"].endswith("/-"):
            array_path = op["path"][:-2]
            if not _resolves(document, array_path) and isinstance(
                _resolved(document, array_path.rsplit("/", 1)[0]), dict
            ):
                added.insert(0, {"op": "add", "path": array_path, "value": []})
        out.extend(added)
        # An operation that fails here is reported when the whole patch is applied.
        with contextlib.suppress(JsonPatchError):
            document = apply_patch(document, added)
    return out


def _resolved(document: Any, pointer: str) -> Any:
    try:
        return jsonpointer.resolve_pointer(document, pointer)
    except jsonpointer.JsonPointerException:
        return None


def _resolves(document: Any, pointer: str) -> bool:
    try:
        jsonpointer.resolve_pointer(document, pointer)
    except jsonpointer.JsonPointerException:
        return False
    return True


def run_state_tool(*, name: str, arguments: str, state: dict[str, Any]) -> StateToolOutcome:
    """Apply one state tool call to ``state`` (not changed). A call that cannot apply (bad
    arguments, a path that does not exist, a snapshot that is not an object) changes nothing
    and tells the model why, so it can try again."""
    parsed = _arguments(arguments)
    if parsed is None:
        return _failed("the arguments must be a JSON object")
    if name == SNAPSHOT_TOOL:
        if "snapshot" not in parsed:
            # TS answers {"success":true} and sends no state.
            return StateToolOutcome(result=orjson.dumps({"success": True}).decode())
        snapshot = parsed["snapshot"]
        if not isinstance(snapshot, dict):
            return _failed("snapshot must be a JSON object (the whole application state)")
        result = orjson.dumps({"success": True, "snapshot": snapshot}).decode()
        return StateToolOutcome(result=result, state=snapshot)
    operations = _operations(parsed.get("delta"))
    if isinstance(operations, str):
        return _failed(operations)
    sent = _with_created_arrays(state, operations)
    try:
        new_state = apply_patch(state, sent)
    except JsonPatchError as error:
        return _failed(f"the patch does not apply to the current state: {error}")
    if not isinstance(new_state, dict):
        return _failed("the patch would replace the state with something that is not an object")
    result = orjson.dumps({"success": True, "delta": operations}).decode()
    return StateToolOutcome(result=result, state=new_state, delta=sent)
