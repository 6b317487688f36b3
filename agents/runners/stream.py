"""Making an agent's event stream well-formed before it is recorded and encoded.

Peers (and hand-written Python agents) do not always bracket their messages: LangGraph streams
have no explicit end for a message that is followed by another, a stream may end with a message
still open, a result may arrive before its call's end. The recorder and the v1 encoder need
each message started once and ended once, so this layer:

- starts a text message on its first delta when the agent never started it, and ends an open
  text message when another one starts (texts do not interleave on the v1 wire);
- drops duplicate starts and deltas of calls it never saw start;
- ends a call before its result;
- names states after this runtime's thread and agent (the frontend knows the agent by the
  name it was given here, and loadAgentState reads states under that name);
- executes the server actions it offered the agent when the agent calls one (as the
  TypeScript runtime does for agent streams), emitting the result;
- ends whatever is still open when the stream ends normally. After a ``RunError`` nothing is
  closed here: the run's end marks unfinished messages failed, keeping what was produced.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace

from agents.interrupts import LANGGRAPH_INTERRUPT, RAW_INTERRUPT_NAME
from copilot_runtime.engine.actions import ServerAction, action_execute
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    MetaEvent,
    RunError,
    TextDelta,
    TextEnd,
    TextStart,
)


@dataclass
class _Call:
    name: str
    arguments: list[str] = field(default_factory=list)
    open: bool = True


@dataclass
class AgentStream:
    thread_id: str
    agent_name: str
    # Server actions offered to the agent: executed here when it calls them.
    server_actions: dict[str, ServerAction] = field(default_factory=dict)
    # Awaited before any of them runs (guardrails in parallel mode: raises on a denial).
    before_server_action: Callable[[], Awaitable[None]] | None = None
    _open_text: str | None = None
    _closed_texts: set[str] = field(default_factory=set)
    _calls: dict[str, _Call] = field(default_factory=dict)
    _answered: set[str] = field(default_factory=set)

    def accept(self, event: Event) -> list[Event]:
        """The events to pass on for one event from the agent."""
        kind = type(event)
        if kind is TextDelta:
            if event.message_id in self._closed_texts:
                return []
            if event.message_id != self._open_text:
                return [*self._start_text(TextStart(message_id=event.message_id)), event]
            return [event]
        if kind is TextStart:
            if event.message_id == self._open_text or event.message_id in self._closed_texts:
                return []
            return self._start_text(event)
        if kind is TextEnd:
            if event.message_id != self._open_text:
                return []
            self._open_text = None
            self._closed_texts.add(event.message_id)
            return [event]
        if kind is ActionStart:
            if event.action_execution_id in self._calls:
                return []
            self._calls[event.action_execution_id] = _Call(name=event.action_name)
            return [event]
        if kind is ActionArgs:
            call = self._calls.get(event.action_execution_id)
            if call is None or not call.open:
                return []
            call.arguments.append(event.delta)
            return [event]
        if kind is ActionEnd:
            call = self._calls.get(event.action_execution_id)
            if call is None or not call.open:
                return []
            call.open = False
            return [event]
        if kind is ActionResult:
            self._answered.add(event.action_execution_id)
            call = self._calls.get(event.action_execution_id)
            if call is not None and call.open:
                call.open = False
                return [ActionEnd(action_execution_id=event.action_execution_id), event]
            return [event]
        if kind is AgentStateSnapshot:
            return [replace(event, thread_id=self.thread_id, agent_name=self.agent_name)]
        if kind is MetaEvent and event.name == RAW_INTERRUPT_NAME:
            return [replace(event, name=LANGGRAPH_INTERRUPT)]
        return [event]

    def _start_text(self, event: TextStart) -> list[Event]:
        out: list[Event] = []
        if self._open_text is not None:
            out.append(TextEnd(message_id=self._open_text))
            self._closed_texts.add(self._open_text)
        self._open_text = event.message_id
        out.append(event)
        return out

    def server_call(self, call_id: str) -> tuple[ServerAction, str] | None:
        """The server action to execute for a call that just ended, with its arguments."""
        call = self._calls.get(call_id)
        if call is None or call.open or call_id in self._answered:
            return None
        action = self.server_actions.get(call.name)
        if action is None or action.needs_approval:
            return None
        self._answered.add(call_id)
        return action, "".join(call.arguments)

    def finish(self) -> list[Event]:
        """End what is still open at a normal end of the stream."""
        out: list[Event] = []
        if self._open_text is not None:
            out.append(TextEnd(message_id=self._open_text))
            self._open_text = None
        for call_id, call in self._calls.items():
            if call.open:
                call.open = False
                out.append(ActionEnd(action_execution_id=call_id))
        return out


def flatten(item: Event | Iterable[Event]) -> Iterable[Event]:
    """Agents may yield one event or several at once (a tuple from a helper)."""
    if isinstance(item, Event):
        return (item,)
    return item


async def normalized_events(
    source: AsyncGenerator[Event | Iterable[Event], None], stream: AgentStream
) -> AsyncIterator[Event]:
    """``source``'s events made well-formed (see the module docstring); stops at a RunError."""
    async with contextlib.aclosing(source):
        async for item in source:
            for raw in flatten(item):
                for event in stream.accept(raw):
                    yield event
                    if type(event) is RunError:
                        return
                    if type(event) is ActionEnd:
                        async for result in _server_result(stream, event.action_execution_id):
                            yield result
    for event in stream.finish():
        yield event
        if type(event) is ActionEnd:
            async for result in _server_result(stream, event.action_execution_id):
                yield result


async def _server_result(stream: AgentStream, call_id: str) -> AsyncIterator[Event]:
    found = stream.server_call(call_id)
    if found is None:
        return
    action, arguments = found
    if stream.before_server_action is not None:
        await stream.before_server_action()
    outcome = await action_execute(action=action, raw_arguments=arguments)
    yield ActionResult(
        action_execution_id=call_id,
        action_name=action.name,
        result=outcome.result,
        is_error=outcome.is_error,
    )
