"""How the engine reaches agents without importing them.

The agents app registers its host when Django starts (``agents/apps.py``): it resolves and
checks agents, runs a non-chat agent's turn and gathers the server actions a turn is offered.
The engine only calls it, so the agents app may build on the engine (its chat turns, actions and
breakers) with no import circle. Without the agents app the runtime runs the chat engine alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.engine.actions import ServerAction, server_actions_from_settings
from copilot_runtime.errors import AgentNotFoundError
from copilot_runtime.events import Event
from copilot_runtime.events.request import TurnRequest

DEFAULT_AGENT_NAME = "default"

BeforeServerAction = Callable[[], Awaitable[None]]


class AgentHost(Protocol):
    async def resolve(self, name: str) -> None:
        """Make ``name`` known to this process (an agent a remote source announces); raises
        ``AgentNotFoundError`` when nothing serves it."""

    def check_runnable(self, name: str) -> None:
        """Raise ``CONFIGURATION_ERROR`` (or ``AGENT_NOT_FOUND``) before a run is created."""

    def turn_events(
        self,
        *,
        request: TurnRequest,
        adapter: ModelAdapter,
        before_server_action: BeforeServerAction | None,
    ) -> AsyncIterator[Event] | None:
        """A non-chat agent's events for the turn; None for the chat engine."""

    async def server_actions(self, request: TurnRequest) -> dict[str, ServerAction]:
        """The server actions the chat engine offers the model for this turn."""


class ChatOnlyHost:
    """The chat engine alone: the ``default`` agent and the configured server actions."""

    async def resolve(self, name: str) -> None:
        if name != DEFAULT_AGENT_NAME:
            raise AgentNotFoundError(name)

    def check_runnable(self, name: str) -> None:
        if name != DEFAULT_AGENT_NAME:
            raise AgentNotFoundError(name)

    def turn_events(
        self,
        *,
        request: TurnRequest,
        adapter: ModelAdapter,
        before_server_action: BeforeServerAction | None,
    ) -> AsyncIterator[Event] | None:
        return None

    async def server_actions(self, request: TurnRequest) -> dict[str, ServerAction]:
        return server_actions_from_settings()


_host: AgentHost = ChatOnlyHost()


def agent_host_register(host: AgentHost) -> None:
    global _host
    _host = host


def agent_host() -> AgentHost:
    return _host
