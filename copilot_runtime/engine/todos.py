"""The built-in ``update_todos`` server action of the todo loop policy.

The engine handles it itself (it changes the turn's state, which is persisted as an agent state
snapshot), so its handler is never called directly.
"""

from __future__ import annotations

from copilot_runtime.engine.actions import ServerAction

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
