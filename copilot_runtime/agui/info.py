"""``GET /info``: what the frontend core reads to pick its transport and its agents."""

from __future__ import annotations

from typing import Any

from agents.registry import agent_list

# The TypeScript runtime version whose v2 protocol this runtime serves (the frontend core shows
# it as the runtime's version; nothing compares it).
COMPATIBLE_RUNTIME_VERSION = "1.75.0"
RUNTIME_MODE_SSE = "sse"

_AGENT_CLASS_NAMES = {"chat": "BuiltInAgent"}


def runtime_info(*, thread_endpoints: bool) -> dict[str, Any]:
    """The runtime info in the TypeScript runtime's shape. Thread listing and reading are
    served from the database; mutations are served too, but the client only uses them with
    managed thread metadata, which this runtime does not have, so they are not advertised."""
    return {
        "version": COMPATIBLE_RUNTIME_VERSION,
        "agents": {
            agent.name: {
                "name": agent.name,
                "description": agent.description,
                "className": _AGENT_CLASS_NAMES.get(agent.kind, "HttpAgent"),
            }
            for agent in agent_list()
        },
        "audioFileTranscriptionEnabled": False,
        "mode": RUNTIME_MODE_SSE,
        "threadEndpoints": {
            "list": thread_endpoints,
            "inspect": thread_endpoints,
            "mutations": False,
            "realtimeMetadata": False,
        },
        "suggestions": True,
        "a2uiEnabled": False,
        "openGenerativeUIEnabled": False,
        "telemetryDisabled": True,
    }
