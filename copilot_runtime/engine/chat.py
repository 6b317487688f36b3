"""The plain chat engine (agent ``default``): one turn of model calls and server actions.

The loop streams the model's answer as canonical events, executes server-side actions and
feeds their results back, until the model answers in text, calls a frontend action (the
client executes it and sends a follow-up request), or the iteration cap is reached.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from copilot_runtime.adapters.base import (
    FinishChunk,
    ModelAdapter,
    ModelRequest,
    TextChunk,
    ToolCallChunk,
    UpstreamError,
    UsageChunk,
)
from copilot_runtime.engine.actions import ServerAction, action_execute
from copilot_runtime.engine.model_messages import model_messages, offered_tools
from copilot_runtime.engine.request import TurnRequest
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    Event,
    GenerationEnd,
    GenerationStart,
    RunError,
    TextDelta,
    TextEnd,
    TextStart,
)

MAX_ITERATIONS_CODE = "MAX_ITERATIONS_REACHED"


def new_message_id() -> str:
    return f"ck-{uuid.uuid4()}"


@dataclass(slots=True)
class _PendingCall:
    id: str
    name: str
    arguments: list[str] = field(default_factory=list)

    @property
    def arguments_text(self) -> str:
        return "".join(self.arguments)


def _tool_choice(request: TurnRequest) -> str | dict[str, Any] | None:
    forwarded = request.forwarded
    if forwarded.tool_choice == "function" and forwarded.tool_choice_function_name:
        return {"type": "function", "function": {"name": forwarded.tool_choice_function_name}}
    return forwarded.tool_choice


@dataclass
class ChatTurn:
    """One turn of the chat engine; iterate ``events()``."""

    request: TurnRequest
    adapter: ModelAdapter
    server_actions: dict[str, ServerAction]
    max_iterations: int

    async def events(self) -> AsyncIterator[Event]:
        conversation = model_messages(self.request.messages, self.request.context)
        tools = offered_tools(self.request.actions, self.server_actions)
        forwarded = self.request.forwarded
        model = forwarded.model or self.adapter.default_model
        for _iteration in range(self.max_iterations):
            model_request = ModelRequest(
                messages=conversation,
                tools=tools,
                model=model,
                max_tokens=forwarded.max_tokens,
                stop=forwarded.stop,
                temperature=forwarded.temperature,
                tool_choice=_tool_choice(self.request) if tools else None,
            )
            calls: list[_PendingCall] = []
            text_parts: list[str] = []
            async for event in self._generation(model_request, model, calls, text_parts):
                yield event
            if not calls:
                return

            assistant: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(text_parts) or None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments_text},
                    }
                    for call in calls
                ],
            }
            conversation = [*conversation, assistant]
            frontend_pending = False
            for call in calls:
                action = self.server_actions.get(call.name)
                if action is None:
                    frontend_pending = True
                    continue
                outcome = await action_execute(action=action, raw_arguments=call.arguments_text)
                yield ActionResult(
                    action_execution_id=call.id,
                    action_name=call.name,
                    result=outcome.result,
                    is_error=outcome.is_error,
                )
                conversation.append(
                    {"role": "tool", "tool_call_id": call.id, "content": outcome.result}
                )
            if frontend_pending:
                # The client runs its own actions and continues with a follow-up request.
                return
        yield RunError(
            message=(
                f"The turn stopped after {self.max_iterations} model calls "
                "(MAX_ITERATIONS): the model kept calling server actions."
            ),
            code=MAX_ITERATIONS_CODE,
            details={"maxIterations": self.max_iterations},
        )

    async def _generation(
        self,
        model_request: ModelRequest,
        model: str,
        calls: list[_PendingCall],
        text_parts: list[str],
    ) -> AsyncIterator[Event]:
        """One model call as events; fills ``calls`` and ``text_parts``."""
        yield GenerationStart(model=model, parameters=_parameters(model_request))
        message_id = new_message_id()
        text_open = False
        by_index: dict[int, _PendingCall] = {}
        finish_reason: str | None = None
        usage = UsageChunk()
        try:
            async for chunk in self.adapter.stream(model_request):
                if type(chunk) is TextChunk:
                    if not text_open:
                        text_open = True
                        yield TextStart(message_id=message_id)
                    text_parts.append(chunk.delta)
                    yield TextDelta(message_id=message_id, delta=chunk.delta)
                elif type(chunk) is ToolCallChunk:
                    call = by_index.get(chunk.index)
                    if call is None:
                        if text_open:
                            text_open = False
                            yield TextEnd(message_id=message_id)
                        call = _PendingCall(id=chunk.id or new_message_id(), name=chunk.name or "")
                        by_index[chunk.index] = call
                        calls.append(call)
                        yield ActionStart(
                            action_execution_id=call.id,
                            action_name=call.name,
                            parent_message_id=message_id,
                        )
                    if chunk.arguments_delta:
                        call.arguments.append(chunk.arguments_delta)
                        yield ActionArgs(action_execution_id=call.id, delta=chunk.arguments_delta)
                elif type(chunk) is FinishChunk:
                    finish_reason = chunk.reason
                elif type(chunk) is UsageChunk:
                    usage = chunk
        except UpstreamError as error:
            yield GenerationEnd(model=model, finish_reason="error")
            yield RunError(message=error.message, code=error.code, details=error.details())
            raise _TurnFailed from error
        if text_open:
            yield TextEnd(message_id=message_id)
        for call in calls:
            yield ActionEnd(action_execution_id=call.id)
        yield GenerationEnd(
            model=model,
            finish_reason=finish_reason,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_input_tokens=usage.cached_input_tokens,
            reasoning_tokens=usage.reasoning_tokens,
        )


class _TurnFailed(Exception):
    """Raised after a RunError was yielded, to stop the turn without further events."""


def _parameters(request: ModelRequest) -> dict[str, Any]:
    return {
        key: value
        for key, value in (
            ("max_tokens", request.max_tokens),
            ("temperature", request.temperature),
            ("stop", request.stop),
            ("tool_choice", request.tool_choice),
            ("tools", len(request.tools)),
        )
        if value
    }


async def chat_turn_events(turn: ChatTurn) -> AsyncIterator[Event]:
    """The turn's events; an upstream failure ends it after its RunError."""
    try:
        async for event in turn.events():
            yield event
    except _TurnFailed:
        return
