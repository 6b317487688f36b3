"""Example agents: a Python agent with state and a human-in-the-loop interrupt, and a model
agent built on the chat engine. Enable them in settings::

    COPILOT_RUNTIME = {
        "AGENTS": {
            "counter": {
                "kind": "python",
                "class": "agents.examples.CounterAgent",
                "description": "Counts the turns of a thread; asks before resetting.",
            },
            "summarizer": {
                "kind": "python",
                "class": "agents.examples.SummarizerAgent",
                "description": "Summarises the conversation with the configured model.",
                "instructions": "Summarise the conversation so far in one sentence.",
            },
            # The same without any code: the built-in configurable LLM agent.
            "support": {
                "kind": "llm",
                "description": "Answers support questions.",
                "instructions": "You are Acme's support agent. Be brief.",
                "tools": [],
            },
        }
    }

and use one from the frontend with ``<CopilotKit agent="counter">``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents.python import AgentContext, PythonAgent
from agents.python.base import AgentOutput
from copilot_runtime.client_numbers import ClientNumberError, parse_client_int

RESET_WORD = "reset"


# No thread counts this far; a larger count in a client's state is not one this agent wrote.
_COUNT_MAX = 2**53 - 1


def _count(value: Any) -> int:
    """The count in the state the client sent back: a whole number (or its ASCII digits);
    anything else starts over at 0 rather than failing the turn."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return parse_client_int(value, minimum=0, maximum=_COUNT_MAX)
    except ClientNumberError:
        return 0


class CounterAgent(PythonAgent):
    """Counts the turns in its state (``{"count": n}``). "reset" asks first (an interrupt);
    the answer "yes" resets the count, anything else keeps it."""

    async def run(self, context: AgentContext) -> AsyncIterator[AgentOutput]:
        count = _count(context.state.get("count"))

        if context.resume is not None:
            if str(context.resume.response).strip().lower() in {"yes", "y", "true"}:
                yield context.update_state({**context.state, "count": 0})
                yield context.say("The counter is reset to 0.")
            else:
                yield context.say(f"Kept the counter at {count}.")
            return

        if context.last_user_text().strip().lower() == RESET_WORD:
            yield context.interrupt({"question": f"Reset the counter (now {count})?"})
            return

        count += 1
        yield context.update_state({**context.state, "count": count})
        writer = context.text_writer()
        yield writer.start()
        yield writer.delta(f"This is turn {count} of this thread.")
        yield writer.delta(" Say 'reset' to start over.")
        yield writer.end()


class SummarizerAgent(PythonAgent):
    """One chat-engine turn with its own instructions and no tools: what the ``llm`` kind
    does, written as code to show ``context.chat``."""

    async def run(self, context: AgentContext) -> AsyncIterator[AgentOutput]:
        instructions = str(self.options.get("instructions") or "Summarise the conversation.")
        async for event in context.chat(instructions=instructions, tools=[]):
            yield event
