"""The built-in configurable LLM agent (kind ``llm``), defined entirely in settings::

    "AGENTS": {
        "support": {
            "kind": "llm",
            "description": "Answers support questions",
            "instructions": "You are the support agent of Acme. Be brief.",
            "model": "gpt-4o-mini",          # optional: the configured model otherwise
            "tools": ["lookup_order"],       # server action names (also remote endpoint
                                             # actions); all of them when left out
            "frontend_actions": True,        # offer the app's frontend actions too
            "loop": {"max_iterations": 5},   # optional loop policy (engine/loop_policy.py)
        },
    }

It is one turn of the chat engine with the instructions as a leading system message and only
the listed tools: no framework needed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agents.python.base import AgentContext, AgentOutput, PythonAgent
from copilot_runtime.errors import CopilotKitError, ErrorCode


class LlmAgent(PythonAgent):
    async def run(self, context: AgentContext) -> AsyncIterator[AgentOutput]:
        tools = self.options.get("tools")
        async for event in context.chat(
            instructions=str(self.options.get("instructions") or "") or None,
            model=self.options.get("model") or None,
            tools=None if tools is None else [str(name) for name in tools],
            frontend_actions=bool(self.options.get("frontend_actions", True)),
        ):
            yield event


def check_llm_options(name: str, options: dict[str, Any]) -> None:
    tools = options.get("tools")
    if tools is not None and not (
        isinstance(tools, list | tuple) and all(isinstance(t, str) for t in tools)
    ):
        raise CopilotKitError(
            f"Agent '{name}': 'tools' must be a list of server action names.",
            code=ErrorCode.CONFIGURATION_ERROR,
        )
    instructions = options.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise CopilotKitError(
            f"Agent '{name}': 'instructions' must be a string.",
            code=ErrorCode.CONFIGURATION_ERROR,
        )
