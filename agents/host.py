"""The agents app as the engine's agent host (copilot_runtime/engine/agent_host.py): registered
by ``AgentsConfig.ready``."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agents.registry import agent_get
from agents.remote.announced import agent_resolve
from agents.turns import agent_turn_events, check_agent_runnable, turn_server_actions
from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.engine.actions import ServerAction
from copilot_runtime.engine.agent_host import BeforeServerAction
from copilot_runtime.events import Event
from copilot_runtime.events.request import TurnRequest


class AgentsHost:
    async def resolve(self, name: str) -> None:
        await agent_resolve(name)

    def check_runnable(self, name: str) -> None:
        check_agent_runnable(agent_get(name))

    def turn_events(
        self,
        *,
        request: TurnRequest,
        adapter: ModelAdapter,
        before_server_action: BeforeServerAction | None,
    ) -> AsyncIterator[Event] | None:
        return agent_turn_events(
            request=request, adapter=adapter, before_server_action=before_server_action
        )

    async def server_actions(self, request: TurnRequest) -> dict[str, ServerAction]:
        return await turn_server_actions(request)
