"""``availableAgents`` and ``loadAgentState``."""

from __future__ import annotations

import importlib
from typing import Any

import orjson
import strawberry

from agents.registry import agent_get, agent_list
from agents.remote.announced import announced_agents_refresh
from conversations.store.health import db_sync_to_async
from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.types.agents import Agent, AgentsResponse, LoadAgentStateResponse
from copilot_runtime.graphql.types.inputs import LoadAgentStateInput


async def resolve_available_agents() -> AgentsResponse:
    # The agents remote endpoints announce are listed too (cached; an unreachable endpoint
    # is skipped with a warning).
    await announced_agents_refresh()
    return AgentsResponse(
        agents=[
            Agent(id=agent.id, name=agent.name, description=agent.description)
            for agent in agent_list()
        ]
    )


async def resolve_load_agent_state(
    info: strawberry.Info[RuntimeContext, None], data: LoadAgentStateInput
) -> LoadAgentStateResponse:
    # Unknown agent: AgentNotFoundError, answered as an AGENT_NOT_FOUND GraphQL error.
    agent_get(data.agent_name)
    # Imported here: it imports the conversations models, which must not load while the schema
    # is being built.
    agent_state = importlib.import_module("copilot_runtime.graphql.agent_state")
    loaded = await db_sync_to_async(agent_state.agent_state_load)(
        thread_id=data.thread_id, agent_name=data.agent_name, user=info.context.user
    )
    return LoadAgentStateResponse(
        thread_id=loaded.thread_id,
        thread_exists=loaded.thread_exists,
        state=_json_text(loaded.state, empty="{}"),
        messages=_json_text(loaded.messages, empty="[]"),
    )


def _json_text(value: Any, *, empty: str) -> str:
    if not value:
        return empty
    return orjson.dumps(value).decode()
