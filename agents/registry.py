"""The agent registry: ``default`` (the plain chat engine) and the agents from settings.

Agent ids are stable: derived from the agent's name, so ``availableAgents`` answers the same
ids on every call and in every process.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from copilot_runtime.conf import runtime_setting
from copilot_runtime.errors import AgentNotFoundError

DEFAULT_AGENT_NAME = "default"

# Agent kinds. ``chat`` is the plain chat engine (only ``default``); the others run in
# agents/runners: ``python`` (a PythonAgent subclass), ``llm`` (the built-in configurable LLM
# agent), ``remote`` (an agent served by a CopilotKit remote endpoint) and ``agui`` (an AG-UI
# agent server, HttpAgent-style).
KIND_CHAT = "chat"
KIND_PYTHON = "python"
KIND_LLM = "llm"
KIND_REMOTE = "remote"
KIND_AGUI = "agui"
AGENT_KINDS = frozenset({KIND_CHAT, KIND_PYTHON, KIND_LLM, KIND_REMOTE, KIND_AGUI})
DEFAULT_AGENT_DESCRIPTION = "The plain chat engine: the configured model with the app's actions."

# A fixed namespace so agent ids are the same everywhere, derived from names alone.
_AGENT_ID_NAMESPACE = uuid.UUID("6f1d9a52-3c1e-4d5b-9a0e-0c7b1f2e8d41")


@dataclass(frozen=True)
class AgentSpec:
    name: str
    description: str
    kind: str
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return str(uuid.uuid5(_AGENT_ID_NAMESPACE, self.name))


def agent_list() -> list[AgentSpec]:
    """Every registered agent, ``default`` first, then the configured ones by name."""
    configured: dict[str, dict[str, Any]] = runtime_setting("AGENTS") or {}
    agents = [
        AgentSpec(name=DEFAULT_AGENT_NAME, description=DEFAULT_AGENT_DESCRIPTION, kind=KIND_CHAT)
    ]
    for name in sorted(configured):
        if name == DEFAULT_AGENT_NAME:
            continue
        options = dict(configured[name] or {})
        agents.append(
            AgentSpec(
                name=name,
                description=str(options.pop("description", "")),
                kind=str(options.pop("kind", KIND_PYTHON)),
                options=options,
            )
        )
    return agents


def agent_get(name: str) -> AgentSpec:
    """The agent called ``name``; ``AgentNotFoundError`` (``AGENT_NOT_FOUND``) when unknown."""
    for agent in agent_list():
        if agent.name == name:
            return agent
    raise AgentNotFoundError(name)
