"""Loop control: how many model calls a turn may make, and whether to keep an agent working.

A ``LoopPolicy`` comes from settings, globally (``COPILOT_RUNTIME["LOOP"]``) and per agent
(``COPILOT_RUNTIME["AGENTS"][name]["loop"]``)::

    "LOOP": {
        "max_iterations": 10,            # model calls per turn; reaching it fails the run
        "should_continue": "myapp.loop.keep_going",   # or "todos" for the built-in policy
        "next_message": "myapp.loop.nudge",           # text appended when it continues
        "next_message_role": "user",     # or "developer"
    }

After each iteration the engine checks, in this order: a pending approval (the loop stops and
returns the call to the client), the iteration cap, then ``should_continue``, so the predicate
is never called past the limit. ``should_continue(turn)`` and ``next_message(turn)`` take one
``LoopTurn`` and may be sync or async; ``should_continue`` returns a bool (or ``(bool, note)``),
``next_message`` the text to append (None for a generic nudge).

The built-in ``todos`` policy keeps the agent going while its todo list (``state["todos"]``, a
list of ``{"title", "done"}``) has open items, reminds it which ones, and offers it the server
action ``update_todos`` to maintain the list.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.utils.module_loading import import_string

from copilot_runtime.conf import runtime_setting
from copilot_runtime.engine.actions import ServerAction
from copilot_runtime.engine.todos import UPDATE_TODOS, open_todos

DEFAULT_NEXT_MESSAGE = "Continue working on the task. If it is complete, say so."
TODOS_POLICY = "todos"


@dataclass
class LoopTurn:
    """What the loop's hooks see after the model answered in text."""

    iteration: int
    agent_name: str
    thread_id: str
    last_text: str
    messages: list[dict[str, Any]]
    state: dict[str, Any]
    feedback: Any = None


@dataclass(frozen=True)
class LoopPolicy:
    max_iterations: int = 10
    should_continue: Callable[[LoopTurn], Any] | None = None
    next_message: Callable[[LoopTurn], Any] | None = None
    next_message_role: str = "user"
    uses_todos: bool = False
    extra_actions: dict[str, ServerAction] = field(default_factory=dict)

    async def check_continue(self, turn: LoopTurn) -> bool:
        if self.should_continue is None:
            return False
        verdict = await _call(self.should_continue, turn)
        if isinstance(verdict, tuple):
            verdict, turn.feedback = verdict
        return bool(verdict)

    async def build_next_message(self, turn: LoopTurn) -> str:
        if self.next_message is None:
            return DEFAULT_NEXT_MESSAGE
        text = await _call(self.next_message, turn)
        return str(text) if text else DEFAULT_NEXT_MESSAGE


async def _call(hook: Callable[[LoopTurn], Any], turn: LoopTurn) -> Any:
    if inspect.iscoroutinefunction(hook):
        return await hook(turn)
    return await sync_to_async(hook, thread_sensitive=False)(turn)


def _resolve(target: Any) -> Callable[[LoopTurn], Any] | None:
    if not target:
        return None
    return import_string(target) if isinstance(target, str) else target


def todos_remaining(turn: LoopTurn) -> bool:
    return bool(open_todos(turn.state))


def todos_remaining_message(turn: LoopTurn) -> str:
    titles = open_todos(turn.state)
    listing = "\n".join(f"- {title}" for title in titles)
    return (
        f"You still have {len(titles)} open todo item(s):\n{listing}\n"
        "Finish them, marking each one done with update_todos, and stop only when all are done."
    )


def loop_policy_for(agent_name: str) -> LoopPolicy:
    """The agent's policy: its own ``loop`` settings over the global ``LOOP`` ones."""
    conf: dict[str, Any] = {"max_iterations": int(runtime_setting("MAX_ITERATIONS"))}
    conf.update(runtime_setting("LOOP") or {})
    agent = (runtime_setting("AGENTS") or {}).get(agent_name) or {}
    conf.update(agent.get("loop") or {})

    should_continue = conf.get("should_continue")
    next_message = conf.get("next_message")
    uses_todos = should_continue == TODOS_POLICY
    extra: dict[str, ServerAction] = {}
    if uses_todos:
        should_continue = todos_remaining
        next_message = next_message or todos_remaining_message
        extra[UPDATE_TODOS.name] = UPDATE_TODOS
    max_iterations = int(conf["max_iterations"])
    if max_iterations < 1:
        raise ValueError("max_iterations must be at least 1")
    return LoopPolicy(
        max_iterations=max_iterations,
        should_continue=_resolve(should_continue),
        next_message=_resolve(next_message),
        next_message_role=str(conf.get("next_message_role") or "user"),
        uses_todos=uses_todos,
        extra_actions=extra,
    )
