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
# A graph on a LangGraph Platform deployment (agents/langgraph_platform).
KIND_LANGGRAPH = "langgraph"
AGENT_KINDS = frozenset({KIND_CHAT, KIND_PYTHON, KIND_LLM, KIND_REMOTE, KIND_AGUI, KIND_LANGGRAPH})
# The kinds whose model request the runtime builds itself: on v2 the client's system and
# developer messages reach their model only when the agent sets ``forward_system_messages``
# (the TypeScript BuiltInAgent's ``forwardSystemMessages``, off by default).
BUILT_IN_KINDS = frozenset({KIND_CHAT, KIND_LLM})
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
    def forwards_system_messages(self) -> bool:
        """Whether the v2 client's system/developer messages reach the model (agents the
        runtime does not build the prompt for get the whole history, as with TypeScript)."""
        if self.kind not in BUILT_IN_KINDS:
            return True
        return self.options.get("forward_system_messages") is True

    @property
    def id(self) -> str:
        return str(uuid.uuid5(_AGENT_ID_NAMESPACE, self.name))


# The agents remote endpoints announce in their ``/info``, as this process last saw them
# (agents/remote/announced.py keeps it fresh). A declared agent wins a name clash.
_ANNOUNCED: dict[str, AgentSpec] = {}


def announced_agents_replace(specs: dict[str, AgentSpec]) -> None:
    global _ANNOUNCED_VERSION
    _ANNOUNCED.clear()
    _ANNOUNCED.update(specs)
    _ANNOUNCED_VERSION += 1


_ANNOUNCED_VERSION = 0
# The last list built, and what it was built from: a turn looks its agent up several times,
# and the settings (re-read only when they change) and the announcements rarely change.
_BUILT: tuple[object, int, tuple[AgentSpec, ...]] | None = None


def agent_list() -> list[AgentSpec]:
    """Every registered agent: ``default`` first, then the configured ones by name, then the
    ones remote endpoints announced (by name)."""
    global _BUILT
    configured: dict[str, dict[str, Any]] = runtime_setting("AGENTS") or _NO_AGENTS
    built = _BUILT
    if built is not None and built[0] is configured and built[1] == _ANNOUNCED_VERSION:
        return list(built[2])
    agents = _agents_built(configured)
    _BUILT = (configured, _ANNOUNCED_VERSION, tuple(agents))
    return agents


_NO_AGENTS: dict[str, dict[str, Any]] = {}


def _agents_built(configured: dict[str, dict[str, Any]]) -> list[AgentSpec]:
    # ``AGENTS["default"]`` tunes the chat engine's entry (its description,
    # ``forward_system_messages``, ``capabilities``); its kind stays ``chat``.
    default_options = dict(configured.get(DEFAULT_AGENT_NAME) or {})
    default_options.pop("kind", None)
    agents = [
        AgentSpec(
            name=DEFAULT_AGENT_NAME,
            description=str(default_options.pop("description", DEFAULT_AGENT_DESCRIPTION)),
            kind=KIND_CHAT,
            options=default_options,
        )
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
    if _ANNOUNCED:
        declared = {agent.name for agent in agents}
        agents.extend(_ANNOUNCED[name] for name in sorted(_ANNOUNCED) if name not in declared)
    return agents


def agent_get(name: str) -> AgentSpec:
    """The agent called ``name``; ``AgentNotFoundError`` (``AGENT_NOT_FOUND``) when unknown."""
    for agent in agent_list():
        if agent.name == name:
            return agent
    raise AgentNotFoundError(name)
