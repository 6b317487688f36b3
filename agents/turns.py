"""Which runner runs an agent's turn: a turn of any agent kind as the canonical event stream.

``agent_turn_events`` is what the engine calls for every turn: None for the chat engine (kind
``chat``, the agent ``default``), which the engine runs itself, and otherwise the events of
the agent's runner (agents/python, agents/remote, agents/agui_client). Every runner's stream
goes through ``AgentStream`` (agents/runners/stream.py), so whatever the peer sends is
recorded and encoded like the chat engine's output. ``check_agent_runnable`` validates an
agent's configuration before its run is created, so a misconfigured agent is a clear
``CONFIGURATION_ERROR``, never a run that fails later.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from agents.peer_http import PeerError
from agents.registry import (
    KIND_AGUI,
    KIND_CHAT,
    KIND_LANGGRAPH,
    KIND_LLM,
    KIND_PYTHON,
    KIND_REMOTE,
    AgentSpec,
    agent_get,
)
from agents.remote.actions import turn_server_actions
from agents.runners.chat import BeforeServerAction
from agents.runners.context import TurnContext
from copilot_runtime.adapters import adapter_spec_for
from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.adapters.kinds import NONE, AdapterSettingError, adapter_spec_check
from copilot_runtime.adapters.none import NO_MODEL_MESSAGE
from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.events import Event, RunError
from copilot_runtime.events.request import TurnRequest

Runner = Callable[[AgentSpec, TurnContext], AsyncIterator[Event]]

__all__ = ["agent_turn_events", "check_agent_runnable", "turn_server_actions"]


def _runner(kind: str) -> Runner:
    # Imported on use: each runner pulls in its own protocol's modules.
    if kind in (KIND_PYTHON, KIND_LLM):
        from agents.python.runner import python_agent_events

        return python_agent_events
    if kind == KIND_REMOTE:
        from agents.remote.runner import remote_agent_events

        return remote_agent_events
    if kind == KIND_AGUI:
        from agents.agui_client.runner import agui_agent_events

        return agui_agent_events
    if kind == KIND_LANGGRAPH:
        from agents.langgraph_platform.runner import langgraph_agent_events

        return langgraph_agent_events
    raise CopilotKitError(
        f"Unknown agent kind '{kind}'; expected one of chat, python, llm, remote, agui, langgraph.",
        code=ErrorCode.CONFIGURATION_ERROR,
    )


def _check_model(spec: AgentSpec) -> None:
    """The agent's adapter setting must be usable; the built-in agents need a model."""
    where = f"AGENTS['{spec.name}']['adapter']" if "adapter" in spec.options else "ADAPTER"
    try:
        setting = adapter_spec_check(adapter_spec_for(spec.name), where=where)
    except AdapterSettingError as error:
        raise CopilotKitError(str(error), code=ErrorCode.CONFIGURATION_ERROR) from error
    if setting["kind"] == NONE and spec.kind in (KIND_CHAT, KIND_LLM):
        raise CopilotKitError(
            f"Agent '{spec.name}' needs a model, and none is configured: {NO_MODEL_MESSAGE}",
            code=ErrorCode.CONFIGURATION_ERROR,
        )


def check_agent_runnable(spec: AgentSpec) -> None:
    """Raise ``CONFIGURATION_ERROR`` when the agent's settings cannot run."""
    _check_model(spec)
    if spec.kind == KIND_CHAT:
        return
    _runner(spec.kind)
    if spec.kind in (KIND_PYTHON, KIND_LLM):
        from agents.python.runner import python_agent_class

        python_agent_class(spec)
    elif spec.kind == KIND_REMOTE:
        from agents.remote.runner import remote_agent_target

        remote_agent_target(spec)
    elif spec.kind == KIND_AGUI:
        from agents.agui_client.runner import agui_peer

        agui_peer(spec)
    elif spec.kind == KIND_LANGGRAPH:
        from agents.langgraph_platform.config import langgraph_target

        langgraph_target(spec)


def agent_turn_events(
    *,
    request: TurnRequest,
    adapter: ModelAdapter,
    before_server_action: BeforeServerAction | None = None,
) -> AsyncIterator[Event] | None:
    """The turn's events from the agent's runner; None for the chat engine."""
    spec = agent_get(request.agent_name)
    if spec.kind == KIND_CHAT:
        return None
    turn = TurnContext(
        request=request,
        adapter=adapter,
        before_server_action=before_server_action,
        actions_for=turn_server_actions,
    )
    return _peer_errors_as_run_errors(_runner(spec.kind)(spec, turn))


async def _peer_errors_as_run_errors(events: AsyncIterator[Event]) -> AsyncIterator[Event]:
    """A peer failing before the agent's stream started (discovering actions, say) ends the
    run with an error naming it, like a failure during the stream."""
    try:
        async for event in events:
            yield event
    except PeerError as exc:
        yield RunError(message=exc.message, code=exc.run_code, details=exc.details())
