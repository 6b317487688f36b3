"""Python agents: subclass ``PythonAgent`` and yield canonical events from ``run``.

A Python agent is configured in settings and runs in the runtime's own process (or worker)::

    COPILOT_RUNTIME = {"AGENTS": {
        "counter": {"kind": "python", "class": "agents.examples.CounterAgent",
                    "description": "Counts the turns of a thread"},
    }}

``run(context)`` is an async generator. It yields canonical events (copilot_runtime/events)
or tuples of them, which the ``AgentContext`` helpers build::

    class Greeter(PythonAgent):
        async def run(self, context):
            yield context.say(f"Hello! You said: {context.last_user_text()}")
            yield context.update_state({"greeted": True})

The context gives the thread's messages (``messages``, as the client sent them, or
``model_messages()`` in the OpenAI chat format), the agent's state (the latest persisted
snapshot, or the state the client sent), the actions (the app's frontend actions and the
runtime's server actions), the answer to an interrupt (``resume``), and ``chat(...)``: one
turn of the runtime's chat engine (model calls and server actions) with the agent's own
instructions and tools. Whatever the agent yields is persisted and streamed like the chat
engine's output; a state update is kept as a new snapshot (history kept) and streamed as an
``AgentStateMessageOutput``; ``interrupt(value)`` ends the run ``interrupted`` until the
client answers.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from agents.interrupts import InterruptAnswer, copilotkit_interrupt, langgraph_interrupt
from agents.runners.chat import BeforeServerAction, chat_turn_events_for
from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.engine.actions import ServerAction, action_execute
from copilot_runtime.engine.model_messages import model_messages
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    MetaEvent,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.events.request import FrontendAction, InputMessage, TurnRequest

AgentOutput = Event | Iterable[Event]


def new_id() -> str:
    return f"ck-{uuid.uuid4()}"


@dataclass
class TextWriter:
    """One assistant message streamed piece by piece: ``start()``, ``delta(...)``, ``end()``."""

    message_id: str = field(default_factory=new_id)

    def start(self) -> TextStart:
        return TextStart(message_id=self.message_id)

    def delta(self, text: str) -> TextDelta:
        return TextDelta(message_id=self.message_id, delta=text)

    def end(self) -> TextEnd:
        return TextEnd(message_id=self.message_id)


@dataclass
class AgentContext:
    """Everything one run of a Python agent may read, and helpers building its events."""

    agent_name: str
    thread_id: str
    request: TurnRequest
    adapter: ModelAdapter
    server_actions: dict[str, ServerAction]
    options: dict[str, Any] = field(default_factory=dict)
    # The agent's state: the latest persisted snapshot, or the client's own view of it.
    state: dict[str, Any] = field(default_factory=dict)
    # The answer to the interrupt this thread is waiting on, if the request carries one.
    resume: InterruptAnswer | None = None
    # The interrupt the previous run ended with, when it is still unanswered.
    pending_interrupt: list[MetaEvent] = field(default_factory=list)
    # Awaited before a server action of ``chat(...)`` runs (the guardrails' verdict).
    before_server_action: BeforeServerAction | None = None

    # --- reading -------------------------------------------------------------------------------

    @property
    def messages(self) -> list[InputMessage]:
        """The thread's messages as the client sent them (text, tool calls, results, images)."""
        return self.request.messages

    @property
    def frontend_actions(self) -> list[FrontendAction]:
        return self.request.actions

    @property
    def properties(self) -> dict[str, Any]:
        return self.request.properties

    def model_messages(self) -> list[dict[str, Any]]:
        """The thread in the OpenAI chat format, with the app's context as a system message."""
        request = self.request
        return model_messages(request.messages, request.context, request.history)

    def last_user_text(self) -> str:
        for message in reversed(self.request.messages):
            if message.kind == "text" and message.role == "user":
                return message.content
        return ""

    # --- producing -----------------------------------------------------------------------------

    def say(self, text: str, *, message_id: str | None = None) -> tuple[Event, ...]:
        """A whole assistant text message."""
        writer = TextWriter(message_id or new_id())
        return (writer.start(), writer.delta(text), writer.end())

    def text_writer(self) -> TextWriter:
        return TextWriter()

    def update_state(self, state: dict[str, Any], *, node_name: str = "") -> AgentStateSnapshot:
        """A new state snapshot (persisted, streamed); ``context.state`` follows it."""
        self.state = dict(state)
        return AgentStateSnapshot(
            thread_id=self.thread_id,
            agent_name=self.agent_name,
            state=dict(state),
            node_name=node_name,
        )

    def interrupt(self, value: Any) -> MetaEvent:
        """Pause for the user (a ``LangGraphInterruptEvent``): return after yielding it. The
        next request's answer is ``context.resume`` in the agent's next run."""
        return langgraph_interrupt(value)

    def copilotkit_interrupt(
        self, value: Any, messages: list[dict[str, Any]] | None = None
    ) -> MetaEvent:
        """A ``CopilotKitLangGraphInterruptEvent``: the value plus messages to show with it
        (``{"id", "role", "content"}`` texts or ``{"id", "name", "arguments"}`` calls)."""
        return copilotkit_interrupt(value, messages)

    def call_frontend_action(
        self, name: str, arguments: dict[str, Any], *, parent_message_id: str | None = None
    ) -> tuple[Event, ...]:
        """Ask the client to run one of its actions; its result comes in the next request."""
        call_id = new_id()
        return (
            ActionStart(
                action_execution_id=call_id, action_name=name, parent_message_id=parent_message_id
            ),
            ActionArgs(action_execution_id=call_id, delta=orjson.dumps(arguments).decode()),
            ActionEnd(action_execution_id=call_id),
        )

    async def run_server_action(
        self, name: str, arguments: dict[str, Any]
    ) -> tuple[tuple[Event, ...], str, bool]:
        """Execute a server action here; returns its events (call and result), the result
        text and whether it failed."""
        action = self.server_actions.get(name)
        if action is None:
            raise KeyError(f"no server action named {name!r}")
        call_id = new_id()
        raw = orjson.dumps(arguments).decode()
        if self.before_server_action is not None:
            await self.before_server_action()
        outcome = await action_execute(action=action, raw_arguments=raw)
        events: tuple[Event, ...] = (
            ActionStart(action_execution_id=call_id, action_name=name),
            ActionArgs(action_execution_id=call_id, delta=raw),
            ActionEnd(action_execution_id=call_id),
            ActionResult(
                action_execution_id=call_id,
                action_name=name,
                result=outcome.result,
                is_error=outcome.is_error,
            ),
        )
        return events, outcome.result, outcome.is_error

    def chat(
        self,
        *,
        instructions: str | None = None,
        model: str | None = None,
        tools: Iterable[str] | None = None,
        frontend_actions: bool = True,
    ) -> AsyncIterator[Event]:
        """One turn of the chat engine (model calls, server actions, the loop policy) over the
        thread, with ``instructions`` as a leading system message and only the server
        actions named in ``tools`` (all of them when None)."""
        request = self.request
        messages = list(request.messages)
        if instructions:
            messages.insert(
                0, InputMessage(id=new_id(), kind="text", role="system", content=instructions)
            )
        forwarded = replace(request.forwarded, model=model or request.forwarded.model)
        chosen = (
            dict(self.server_actions)
            if tools is None
            else {name: self.server_actions[name] for name in tools if name in self.server_actions}
        )
        turn_request = replace(
            request,
            messages=messages,
            forwarded=forwarded,
            actions=list(request.actions) if frontend_actions else [],
            state=dict(self.state),
        )
        return chat_turn_events_for(
            turn_request, self.adapter, chosen, before_server_action=self.before_server_action
        )


class PythonAgent:
    """Base class of Python agents; override ``run``.

    One instance is made per run, with the agent's name and its settings (``options``: the
    agent's entry in ``COPILOT_RUNTIME["AGENTS"]`` minus ``kind`` and ``description``).
    """

    def __init__(self, *, name: str, options: dict[str, Any] | None = None) -> None:
        self.name = name
        self.options = dict(options or {})

    async def run(self, context: AgentContext) -> AsyncIterator[AgentOutput]:
        """Yield events (or tuples of events) for one turn. Override this."""
        raise NotImplementedError(f"{type(self).__name__} must implement run(context)")
        yield ()  # pragma: no cover - makes this an async generator for type checkers
