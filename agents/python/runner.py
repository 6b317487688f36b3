"""Running a Python agent (kinds ``python`` and ``llm``) for one turn."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from django.utils.module_loading import import_string

from agents.python.base import AgentContext, PythonAgent
from agents.python.llm import LlmAgent, check_llm_options
from agents.registry import KIND_LLM, AgentSpec
from agents.runners.context import TurnContext
from agents.runners.stream import AgentStream, normalized_events
from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.events import Event, RunError
from copilot_runtime.guardrails.gate import GuardrailDenied

logger = logging.getLogger(__name__)

AGENT_ERROR_CODE = "AGENT_ERROR"


def python_agent_class(spec: AgentSpec) -> type[PythonAgent]:
    """The agent's class: ``LlmAgent`` for ``llm``, else the ``class`` option's dotted path."""
    if spec.kind == KIND_LLM:
        check_llm_options(spec.name, spec.options)
        return LlmAgent
    path = spec.options.get("class")
    if not isinstance(path, str) or not path:
        raise CopilotKitError(
            f"Agent '{spec.name}' (kind 'python') needs a 'class': the dotted path of a "
            "PythonAgent subclass.",
            code=ErrorCode.CONFIGURATION_ERROR,
        )
    try:
        target: Any = import_string(path)
    except ImportError as exc:
        raise CopilotKitError(
            f"Agent '{spec.name}': its class '{path}' cannot be imported.",
            code=ErrorCode.CONFIGURATION_ERROR,
        ) from exc
    if not (isinstance(target, type) and issubclass(target, PythonAgent)):
        raise CopilotKitError(
            f"Agent '{spec.name}': '{path}' is not a PythonAgent subclass.",
            code=ErrorCode.CONFIGURATION_ERROR,
        )
    return target


async def python_agent_events(spec: AgentSpec, turn: TurnContext) -> AsyncIterator[Event]:
    agent = python_agent_class(spec)(name=spec.name, options=spec.options)
    request = turn.request
    context = AgentContext(
        agent_name=spec.name,
        thread_id=turn.thread_id,
        request=request,
        adapter=turn.adapter,
        server_actions=await turn.server_actions(),
        options=dict(spec.options),
        state=dict(request.state),
        resume=await turn.interrupt_answer(),
        pending_interrupt=await turn.pending_interrupt(),
        before_server_action=turn.before_server_action,
    )
    stream = AgentStream(thread_id=turn.thread_id, agent_name=spec.name)
    try:
        async for event in normalized_events(agent.run(context), stream):
            yield event
    except (CopilotKitError, GuardrailDenied):
        raise
    except Exception as exc:
        # The agent's own bug: logged with its traceback, told to the client without one.
        logger.exception("Python agent '%s' failed", spec.name)
        yield RunError(
            message=f"The agent '{spec.name}' failed ({type(exc).__name__}); see the server logs.",
            code=AGENT_ERROR_CODE,
            details={"agent": spec.name},
        )
