"""A LangGraph run's stream parts (``runs.stream`` with ``events``, ``updates`` and
``values``) as the runtime's events.

- ``events``: LangChain's ``astream_events`` events, mapped as for a LangGraph agent behind a
  CopilotKit remote endpoint (agents/peer_events/langgraph.py): streamed text, tool calls,
  CopilotKit's custom events;
- ``updates``: ``__interrupt__`` pauses the run with a ``LangGraphInterruptEvent`` carrying
  the interrupt's value and id (the answer resumes it); tool messages a node added are the
  results of the graph's own tool calls (the client must not run them);
- ``values``: the graph's state without its messages, as a state snapshot: the first of the
  run, then whenever it changed;
- ``error``: the run fails with the deployment's message.
"""

from __future__ import annotations

from typing import Any

import orjson

from agents.interrupts import langgraph_interrupt
from agents.peer_events.langgraph import LangGraphEventMapper
from copilot_runtime.events import ActionResult, AgentStateSnapshot, Event, RunError

AGENT_ERROR_CODE = "AGENT_ERROR"
# State keys that are not the agent's state: the conversation, and CopilotKit's own input.
_NOT_STATE = frozenset({"messages", "copilotkit"})


def _agent_state(values: dict[str, Any]) -> dict[str, Any]:
    """The graph's values that are the agent's state (``__interrupt__`` and other
    ``__``-keys are the server's bookkeeping)."""
    return {k: v for k, v in values.items() if k not in _NOT_STATE and not k.startswith("__")}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return orjson.dumps(content, default=str).decode()


class LangGraphRunMapper:
    """Stateful: one per run."""

    def __init__(self, *, thread_id: str, agent_name: str, state: dict[str, Any]) -> None:
        self.thread_id = thread_id
        self.agent_name = agent_name
        self._events = LangGraphEventMapper()
        self._state = _agent_state(state)
        self._state_sent = False
        self.interrupted = False

    def feed(self, mode: str, data: Any) -> list[Event]:
        mode = mode.split("|", 1)[0]  # "events|subgraph:..." from subgraphs
        if mode == "events" and isinstance(data, dict):
            return self._events.feed(data)
        if mode == "updates" and isinstance(data, dict):
            return self._updates(data)
        if mode == "values" and isinstance(data, dict):
            return self._values(data)
        if mode == "error":
            message = data.get("message") if isinstance(data, dict) else data
            return [
                RunError(
                    message=f"The LangGraph deployment failed the run: {message}",
                    code=AGENT_ERROR_CODE,
                    details={"agent": self.agent_name},
                )
            ]
        return []

    def _updates(self, data: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        for node, update in data.items():
            if node == "__interrupt__":
                for item in update if isinstance(update, list) else [update]:
                    if isinstance(item, dict):
                        self.interrupted = True
                        ids = (str(item["id"]),) if item.get("id") else ()
                        out.append(langgraph_interrupt(item.get("value"), interrupt_ids=ids))
                continue
            messages = update.get("messages") if isinstance(update, dict) else None
            for message in messages if isinstance(messages, list) else ():
                if isinstance(message, dict) and message.get("type") == "tool":
                    out.append(
                        ActionResult(
                            action_execution_id=str(message.get("tool_call_id") or ""),
                            action_name=str(message.get("name") or ""),
                            result=_text(message.get("content")),
                        )
                    )
        return out

    def _values(self, data: dict[str, Any]) -> list[Event]:
        state = _agent_state(data)
        if state == self._state and self._state_sent:
            return []
        # The first values of a run always go out: the client learns the agent's state (and,
        # on v1, that this agent runs the thread) even when the run leaves it unchanged.
        self._state, self._state_sent = state, True
        return [
            AgentStateSnapshot(
                thread_id=self.thread_id, agent_name=self.agent_name, state=dict(state)
            )
        ]
