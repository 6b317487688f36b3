"""``availableAgents`` and ``loadAgentState`` results."""

from __future__ import annotations

import strawberry


@strawberry.type
class Agent:
    description: str
    id: str
    name: str


@strawberry.type
class AgentsResponse:
    agents: list[Agent]


@strawberry.type
class LoadAgentStateResponse:
    thread_id: str
    thread_exists: bool
    # Both JSON text: the client parses them itself.
    state: str
    messages: str
