"""Python agents the agent tests configure."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from agents.python import AgentContext, PythonAgent
from agents.python.base import AgentOutput


class RecordingAgent(PythonAgent):
    """Records what its context offers, answers with one text message."""

    seen: ClassVar[list[dict[str, Any]]] = []

    async def run(self, context: AgentContext) -> AsyncIterator[AgentOutput]:
        self.seen.append(
            {
                "options": dict(self.options),
                "messages": [(m.kind, m.role, m.content) for m in context.messages],
                "model_messages": context.model_messages(),
                "state": dict(context.state),
                "frontend_actions": [a.name for a in context.frontend_actions],
                "server_actions": sorted(context.server_actions),
                "properties": dict(context.properties),
                "resume": context.resume,
                "pending": list(context.pending_interrupt),
            }
        )
        yield context.say("recorded")


class BrokenAgent(PythonAgent):
    """Starts a message, then fails."""

    async def run(self, context: AgentContext) -> AsyncIterator[AgentOutput]:
        writer = context.text_writer()
        yield writer.start()
        yield writer.delta("half a sent")
        raise ValueError("secret internals must not reach the client")


class ToolUsingAgent(PythonAgent):
    """Runs a server action itself and calls a frontend action."""

    async def run(self, context: AgentContext) -> AsyncIterator[AgentOutput]:
        events, result, failed = await context.run_server_action("serverAdd", {"a": 2, "b": 3})
        yield events
        yield context.say(f"The server said {result} (failed: {failed}).")
        yield context.call_frontend_action("sayHello", {"name": "Bob"})


class NotAnAgent:
    pass


class ApprovalAgent(PythonAgent):
    """Asks with a CopilotKit interrupt (value and messages to show), then reports the answer."""

    async def run(self, context: AgentContext) -> AsyncIterator[AgentOutput]:
        if context.resume is not None:
            yield context.update_state({"decision": context.resume.response})
            yield context.say(f"Decision recorded: {context.resume.response}.")
            return
        yield context.say("I need your approval first.")
        yield context.copilotkit_interrupt(
            {"question": "Ship the order?"},
            messages=[
                {"id": "approval-text", "role": "assistant", "content": "Order #42, 3 items."},
                {"id": "approval-call", "name": "showOrder", "arguments": {"order": 42}},
            ],
        )


class DraftingAgent(PythonAgent):
    """Keeps a large document in its state and changes one small part of it per step: from
    the state it was given (or a new draft), appends a note, then moves the stage on."""

    async def run(self, context: AgentContext) -> AsyncIterator[AgentOutput]:
        state = dict(context.state) or {"document": "lorem ipsum " * 300, "notes": [], "stage": 0}
        state = {**state, "notes": [*state["notes"], f"note {len(state['notes'])}"]}
        yield context.update_state(state)
        yield context.update_state({**state, "stage": state["stage"] + 1})
        yield context.say("drafted")
