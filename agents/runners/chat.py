"""The chat engine's turn, built for an agent (the ``llm`` kind and ``AgentContext.chat``).

Built like the chat engine's own turn in engine/execute.py: the agent's loop policy (its own
``loop`` settings over the global ones) and the configured circuit breakers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.conf import runtime_setting
from copilot_runtime.engine.actions import ServerAction
from copilot_runtime.engine.breakers import EmptyCallsBreaker, ToolBreaker
from copilot_runtime.engine.chat import ChatTurn, chat_turn_events
from copilot_runtime.engine.loop_policy import loop_policy_for
from copilot_runtime.events import Event
from copilot_runtime.events.request import TurnRequest

BeforeServerAction = Callable[[], Awaitable[None]]


def chat_turn_events_for(
    request: TurnRequest,
    adapter: ModelAdapter,
    server_actions: dict[str, ServerAction],
    before_server_action: BeforeServerAction | None = None,
) -> AsyncIterator[Event]:
    policy = loop_policy_for(request.agent_name)
    turn = ChatTurn(
        request=request,
        adapter=adapter,
        server_actions=server_actions,
        max_iterations=policy.max_iterations,
        policy=policy,
        tool_breaker=ToolBreaker(threshold=int(runtime_setting("TOOL_FAILURE_LIMIT"))),
        empty_calls_breaker=EmptyCallsBreaker(
            threshold=int(runtime_setting("EMPTY_TOOL_CALL_LIMIT"))
        ),
        before_server_action=before_server_action,
    )
    return chat_turn_events(turn)
