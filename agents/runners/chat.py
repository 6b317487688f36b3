"""The chat engine's turn for an agent (the ``llm`` kind and ``AgentContext.chat``): set up
exactly as the runtime's own chat (``configured_chat_turn`` in copilot_runtime/engine/chat.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.engine.actions import ServerAction
from copilot_runtime.engine.chat import chat_turn_events, configured_chat_turn
from copilot_runtime.events import Event
from copilot_runtime.events.request import TurnRequest

BeforeServerAction = Callable[[], Awaitable[None]]


def chat_turn_events_for(
    request: TurnRequest,
    adapter: ModelAdapter,
    server_actions: dict[str, ServerAction],
    before_server_action: BeforeServerAction | None = None,
) -> AsyncIterator[Event]:
    return chat_turn_events(
        configured_chat_turn(
            request=request,
            adapter=adapter,
            server_actions=server_actions,
            before_server_action=before_server_action,
        )
    )
