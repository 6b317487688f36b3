"""The built-in ``update_todos`` server action of the todo loop policy.

The engine handles it itself (it changes the turn's state, which is persisted as an agent state
snapshot), so its handler is never called directly.
"""

from __future__ import annotations

from typing import Any

import orjson

from copilot_runtime.engine.actions import ServerAction, encode_error

UPDATE_TODOS_NAME = "update_todos"


def _handled_by_the_engine(**_: object) -> str:
    raise RuntimeError("update_todos is applied by the engine, not called")


UPDATE_TODOS = ServerAction(
    name=UPDATE_TODOS_NAME,
    description=(
        "Replace your todo list. Send every item each time, with done=true for finished ones."
    ),
    parameters={
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "title": {"type": "string"},
                        "done": {"type": "boolean"},
                    },
                    "required": ["title"],
                },
            }
        },
        "required": ["todos"],
    },
    handler=_handled_by_the_engine,
)


def open_todos(state: dict[str, Any]) -> list[str]:
    """Titles of the todo items not done yet."""
    todos = state.get("todos")
    if not isinstance(todos, list):
        return []
    titles = []
    for item in todos:
        if isinstance(item, dict) and not item.get("done") and item.get("status") != "done":
            titles.append(str(item.get("title") or item.get("content") or "untitled"))
        elif isinstance(item, str):
            titles.append(item)
    return titles


def apply_update_todos(*, arguments: str, state: dict[str, Any]) -> tuple[str, bool]:
    """An ``update_todos`` call applied to the turn's ``state``: the result for the model, and
    whether it is an error (the list left as it was)."""
    try:
        todos = orjson.loads(arguments or "{}").get("todos")
    except (orjson.JSONDecodeError, AttributeError):
        todos = None
    if not isinstance(todos, list):
        return encode_error("INVALID_ARGUMENTS", "todos must be a list of items"), True
    state["todos"] = todos
    return f"Todo list saved: {len(open_todos(state))} open item(s).", False
