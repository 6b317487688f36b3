"""``GET /info``: what the frontend core reads to pick its transport and its agents."""

from __future__ import annotations

from typing import Any

from agents.registry import KIND_AGUI, KIND_CHAT, KIND_LLM, AgentSpec, agent_list

# The TypeScript runtime version whose v2 protocol this runtime serves (the frontend core shows
# it as the runtime's version; nothing compares it).
COMPATIBLE_RUNTIME_VERSION = "1.75.0"
RUNTIME_MODE_SSE = "sse"

_AGENT_CLASS_NAMES = {KIND_CHAT: "BuiltInAgent", KIND_LLM: "BuiltInAgent"}

# What the chat engine does, in AG-UI's capability vocabulary: the same answer as the
# TypeScript runtime's BuiltInAgent (tools of its own and the client's, streamed text, the
# interrupt protocol through ``resume``).
_BUILT_IN_CAPABILITIES: dict[str, Any] = {
    "tools": {"supported": True, "clientProvided": True},
    "transport": {"streaming": True},
    "humanInTheLoop": {"interrupts": True},
}
# Agents written against the runtime (python, remote CopilotKit endpoints) also keep a state
# that streams as snapshots and deltas and persists with the thread.
_STATEFUL_CAPABILITIES: dict[str, Any] = {
    **_BUILT_IN_CAPABILITIES,
    "state": {"snapshots": True, "deltas": True, "persistentState": True},
}


def agent_capabilities(agent: AgentSpec) -> dict[str, Any] | None:
    """What the agent can do; None for an AG-UI server, which alone knows (as for the
    TypeScript runtime's HttpAgent). An agent's own ``capabilities`` setting is merged over
    the inferred ones, key by key, as the TypeScript BuiltInAgent merges its config."""
    if agent.kind == KIND_AGUI:
        inferred: dict[str, Any] | None = None
    elif agent.kind == KIND_CHAT:
        inferred = dict(_BUILT_IN_CAPABILITIES)
    elif agent.kind == KIND_LLM:
        inferred = dict(_BUILT_IN_CAPABILITIES)
        client_tools = bool(agent.options.get("frontend_actions", True))
        inferred["tools"] = {"supported": True, "clientProvided": client_tools}
    else:
        inferred = dict(_STATEFUL_CAPABILITIES)
    configured = agent.options.get("capabilities")
    if isinstance(configured, dict) and configured:
        return {**(inferred or {}), **configured}
    return inferred


def _agent_entry(agent: AgentSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": agent.name,
        "description": agent.description,
        "className": _AGENT_CLASS_NAMES.get(agent.kind, "HttpAgent"),
    }
    capabilities = agent_capabilities(agent)
    if capabilities is not None:
        entry["capabilities"] = capabilities
    return entry


def _thread_endpoints(enabled: bool) -> dict[str, bool]:
    # Listing and reading come from the database; mutations are served too, but the client
    # only uses them with managed thread metadata, which this runtime does not have.
    return {"list": enabled, "inspect": enabled, "mutations": False, "realtimeMetadata": False}


def runtime_info(*, single_route: bool) -> dict[str, Any]:
    """The runtime info in the TypeScript runtime's shape. Asked through the single-route
    envelope, the thread endpoints are reachable only as ``resource/request`` calls, which
    ``singleRoute`` announces (the top-level flags are then off, as in TypeScript)."""
    info: dict[str, Any] = {
        "version": COMPATIBLE_RUNTIME_VERSION,
        "agents": {agent.name: _agent_entry(agent) for agent in agent_list()},
        "audioFileTranscriptionEnabled": False,
        "mode": RUNTIME_MODE_SSE,
        "threadEndpoints": _thread_endpoints(not single_route),
    }
    if single_route:
        info["singleRoute"] = {
            "resourceOperations": True,
            "threadEndpoints": _thread_endpoints(True),
        }
    info.update(
        suggestions=True,
        a2uiEnabled=False,
        openGenerativeUIEnabled=False,
        telemetryDisabled=True,
    )
    return info
