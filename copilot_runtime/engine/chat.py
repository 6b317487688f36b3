"""The plain chat engine (agent ``default``): one turn of model calls and server actions.

The loop streams the model's answer as canonical events, executes server-side actions and
feeds their results back, until the model answers in text, calls a frontend action (the
client executes it and sends a follow-up request), or the iteration cap is reached.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from copilot_runtime.adapters.base import (
    FinishChunk,
    ModelAdapter,
    ModelRequest,
    ReasoningChunk,
    ReasoningSealChunk,
    TextChunk,
    ToolCallChunk,
    UpstreamError,
    UsageChunk,
)
from copilot_runtime.conf import runtime_setting
from copilot_runtime.engine.actions import ServerAction, action_execute
from copilot_runtime.engine.approvals import (
    AwaitingDecision,
    decisions_to_apply,
    rejected_result,
)
from copilot_runtime.engine.breakers import (
    EMPTY_TOOL_CALLS_CODE,
    EMPTY_TOOL_CALLS_MESSAGE,
    EmptyCallsBreaker,
    ToolBreaker,
    stop_message,
)
from copilot_runtime.engine.loop_policy import LoopPolicy, LoopTurn, loop_policy_for
from copilot_runtime.engine.model_messages import assistant_message, model_messages, offered_tools
from copilot_runtime.engine.state_tools import (
    STATE_TOOL_DEFINITIONS,
    STATE_TOOL_NAMES,
    run_state_tool,
    state_tools_enabled,
    with_state_prompt,
)
from copilot_runtime.engine.todos import UPDATE_TODOS_NAME, apply_update_todos
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionResult,
    ActionStart,
    AgentStateSnapshot,
    Event,
    GenerationEnd,
    GenerationStart,
    LimitTrip,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunError,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.events.reasoning import sealed_value, thinking_block
from copilot_runtime.events.request import TurnRequest

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
    """One turn of the chat engine; iterate ``events()``.

    After each model call the loop checks, in order: a call waiting for approval (stop and
    return it to the client), the iteration cap (fail the run), and, when the model answered in
    text, the policy's ``should_continue`` (append its next message and go on).
    """

    request: TurnRequest
    adapter: ModelAdapter
    server_actions: dict[str, ServerAction]
    max_iterations: int
    policy: LoopPolicy | None = None
    tool_breaker: ToolBreaker = field(default_factory=ToolBreaker)
    empty_calls_breaker: EmptyCallsBreaker = field(default_factory=EmptyCallsBreaker)
    # Awaited before any server action executes (guardrails in parallel mode: it raises when
    # the message is denied, so no action of a denied message ever runs).
    before_server_action: Callable[[], Awaitable[None]] | None = None
    # Offer AGUISendStateSnapshot / AGUISendStateDelta and show the state in the system prompt
    # (engine/state_tools.py): v2 turns of agents that do not turn them off.
    state_tools: bool = False

    async def events(self) -> AsyncIterator[Event]:
        policy = self.policy or LoopPolicy(max_iterations=self.max_iterations)
        actions = {**self.server_actions, **policy.extra_actions}
        state = dict(self.request.state)
        request = self.request
        conversation = model_messages(request.messages, request.context, request.history)
        if self.state_tools:
            conversation = with_state_prompt(conversation=conversation, state=state)
            # After the client's tools, as TS merges them; the state tools win a name clash.
            frontend = [a for a in request.actions if a.name not in STATE_TOOL_NAMES]
            tools = [*offered_tools(frontend, actions), *STATE_TOOL_DEFINITIONS]
        else:
            tools = offered_tools(self.request.actions, actions)
        forwarded = self.request.forwarded
        model = forwarded.model or self.adapter.default_model

        for awaiting in decisions_to_apply(conversation, actions):
            async for event in self._apply_decision(awaiting, conversation):
                yield event

        iteration = 0
        while True:
            iteration += 1
            model_request = ModelRequest(
                messages=conversation,
                tools=tools,
                model=model,
                max_tokens=forwarded.max_tokens,
                stop=forwarded.stop,
                temperature=forwarded.temperature,
                tool_choice=self._tool_choice(tools),
            )
            calls: list[_PendingCall] = []
            text_parts: list[str] = []
            thinking: list[dict[str, Any]] = []
            async for event in self._generation(model_request, model, calls, text_parts, thinking):
                yield event

            if self.empty_calls_breaker.observe([call.arguments_text for call in calls]):
                count = self.empty_calls_breaker.consecutive
                message = EMPTY_TOOL_CALLS_MESSAGE.format(count=count)
                yield LimitTrip(
                    kind=EMPTY_TOOL_CALLS_CODE, message=message, details={"count": count}
                )
                yield RunError(
                    message=message, code=EMPTY_TOOL_CALLS_CODE, details={"count": count}
                )
                return

            if not calls:
                # The model answered in text: the cap, then the policy, decide whether to go on.
                if iteration >= policy.max_iterations or policy.should_continue is None:
                    return
                turn = LoopTurn(
                    iteration=iteration,
                    agent_name=self.request.agent_name,
                    thread_id=self.request.thread_id or "",
                    last_text="".join(text_parts),
                    messages=conversation,
                    state=state,
                )
                if not await policy.check_continue(turn):
                    return
                nudge = await policy.build_next_message(turn)
                async for event in _injected_message(nudge, policy.next_message_role):
                    yield event
                conversation = [
                    *conversation,
                    {"role": "assistant", "content": "".join(text_parts)},
                    {"role": policy.next_message_role, "content": nudge},
                ]
                continue

            conversation = [
                *conversation,
                assistant_message(
                    text="".join(text_parts),
                    calls=[(c.id, c.name, c.arguments_text) for c in calls],
                    thinking=thinking,
                ),
            ]
            returned_to_client = False
            state_updated = 0
            for call in calls:
                if self.state_tools and call.name in STATE_TOOL_NAMES:
                    state_events = self._state_tool(call, conversation, state)
                    last = state_events[-1]
                    state_updated += isinstance(last, ActionResult) and not last.is_error
                    for event in state_events:
                        yield event
                    continue
                action = actions.get(call.name)
                if action is None or action.needs_approval:
                    # A frontend action, or one the user must approve first: the client gets
                    # the call and answers in its next request.
                    returned_to_client = True
                    continue
                async for event in self._execute(action, call, conversation, state):
                    yield event
            if returned_to_client or state_updated == len(calls):
                # A step that only updated the state ends the turn, as TS's built-in agent
                # (one model step by default) does; a failed update goes back to the model.
                return
            if iteration >= policy.max_iterations:
                message = (
                    f"The turn stopped after {policy.max_iterations} model calls, its limit "
                    "(max_iterations, the MAX_ITERATIONS setting): the model kept calling "
                    "server actions."
                )
                details = {"maxIterations": policy.max_iterations}
                yield LimitTrip(kind="max_iterations", message=message, details=details)
                yield RunError(message=message, code=MAX_ITERATIONS_CODE, details=details)
                return

    async def _execute(
        self,
        action: ServerAction,
        call: _PendingCall,
        conversation: list[dict[str, Any]],
        state: dict[str, Any],
    ) -> AsyncIterator[Event]:
        """Run one server action (through the tool-level breaker) and feed its result back."""
        if self.before_server_action is not None:
            await self.before_server_action()
        arguments = call.arguments_text
        count = self.tool_breaker.tripped(call.name, arguments)
        if count:
            result, is_error = stop_message(call.name, count), True
            yield LimitTrip(
                kind="tool_circuit_breaker",
                message=f"'{call.name}' was not executed after {count} identical failures.",
                details={"action": call.name, "count": count},
            )
        elif action.name == UPDATE_TODOS_NAME:
            result, is_error = apply_update_todos(arguments=arguments, state=state)
            if not is_error:
                yield AgentStateSnapshot(
                    thread_id=self.request.thread_id or "",
                    agent_name=self.request.agent_name,
                    state=dict(state),
                )
        else:
            outcome = await action_execute(action=action, raw_arguments=arguments)
            result, is_error = outcome.result, outcome.is_error
            self.tool_breaker.record(call.name, arguments, failed=is_error)
        yield ActionResult(
            action_execution_id=call.id, action_name=call.name, result=result, is_error=is_error
        )
        conversation.append({"role": "tool", "tool_call_id": call.id, "content": result})

    def _tool_choice(self, tools: list[dict[str, Any]]) -> str | dict[str, Any] | None:
        if not tools:
            return None
        chosen = _tool_choice(self.request)
        # TS's AI SDK sends "auto" when nothing is chosen, and it always has the state tools.
        return chosen or ("auto" if self.state_tools else None)

    def _state_tool(
        self, call: _PendingCall, conversation: list[dict[str, Any]], state: dict[str, Any]
    ) -> list[Event]:
        """Apply a state tool call: the new state (STATE_SNAPSHOT / STATE_DELTA), then the
        result last, in TS's order. A failed update changes nothing and tells the model why."""
        outcome = run_state_tool(name=call.name, arguments=call.arguments_text, state=state)
        events: list[Event] = []
        if outcome.state is not None:
            state.clear()
            state.update(outcome.state)
            events.append(
                AgentStateSnapshot(
                    thread_id=self.request.thread_id or "",
                    agent_name=self.request.agent_name,
                    state=dict(state),
                    delta=outcome.delta,
                    replaced=outcome.delta is None,
                )
            )
        events.append(
            ActionResult(
                action_execution_id=call.id,
                action_name=call.name,
                result=outcome.result,
                is_error=outcome.is_error,
            )
        )
        conversation.append({"role": "tool", "tool_call_id": call.id, "content": outcome.result})
        return events

    async def _apply_decision(
        self, awaiting: AwaitingDecision, conversation: list[dict[str, Any]]
    ) -> AsyncIterator[Event]:
        """The client answered a call waiting for approval: run it, or record the refusal."""
        if awaiting.decision.approved:
            outcome = await action_execute(action=awaiting.action, raw_arguments=awaiting.arguments)
            result, is_error = outcome.result, outcome.is_error
        else:
            result, is_error = rejected_result(awaiting.action.name, awaiting.decision), False
        yield ActionResult(
            action_execution_id=awaiting.call_id,
            action_name=awaiting.action.name,
            result=result,
            is_error=is_error,
        )
        # Replaced, not changed: the entries are shared with later turns (model_messages).
        for index, message in enumerate(conversation):
            if message.get("role") == "tool" and message.get("tool_call_id") == awaiting.call_id:
                conversation[index] = {**message, "content": result}

    async def _generation(
        self,
        model_request: ModelRequest,
        model: str,
        calls: list[_PendingCall],
        text_parts: list[str],
        thinking: list[dict[str, Any]],
    ) -> AsyncIterator[Event]:
        """One model call as events; fills ``calls``, ``text_parts`` and ``thinking`` (the
        signed thinking blocks, which the provider wants back with the calls' results)."""
        yield GenerationStart(
            model=model, parameters=_parameters(model_request), request=model_request
        )
        message_id = new_message_id()
        text_open = False
        text_used = False  # a text message was opened: text after reasoning starts a new one
        reasoning_id: str | None = None  # the reasoning block open, if any
        reasoning_parts: list[str] = []
        by_index: dict[int, _PendingCall] = {}
        finish_reason: str | None = None
        usage = UsageChunk()
        try:
            async for chunk in self.adapter.stream(model_request):
                kind = type(chunk)
                if kind is ReasoningChunk:
                    if reasoning_id is None:
                        if text_open:
                            text_open = False
                            yield TextEnd(message_id=message_id)
                        reasoning_id = new_message_id()
                        yield ReasoningStart(message_id=reasoning_id)
                    reasoning_parts.append(chunk.delta)
                    yield ReasoningDelta(message_id=reasoning_id, delta=chunk.delta)
                    continue
                if kind is ReasoningSealChunk:
                    if reasoning_id is None:  # a redacted block: no text came before its seal
                        if text_open:
                            text_open = False
                            yield TextEnd(message_id=message_id)
                        reasoning_id = new_message_id()
                        yield ReasoningStart(message_id=reasoning_id)
                    sealed = sealed_value(signature=chunk.signature, redacted=chunk.redacted)
                    block = thinking_block(content="".join(reasoning_parts), encrypted_value=sealed)
                    if block is not None:
                        thinking.append(block)
                    yield ReasoningEnd(message_id=reasoning_id, encrypted_value=sealed)
                    reasoning_id = None
                    reasoning_parts = []
                    continue
                if reasoning_id is not None and kind is not UsageChunk:
                    # Closed by whatever follows it, as the TypeScript runtime closes it.
                    yield ReasoningEnd(message_id=reasoning_id)
                    reasoning_id = None
                    reasoning_parts = []
                if kind is TextChunk:
                    if not text_open:
                        if text_used:
                            message_id = new_message_id()
                        text_open = text_used = True
                        yield TextStart(message_id=message_id)
                    text_parts.append(chunk.delta)
                    yield TextDelta(message_id=message_id, delta=chunk.delta)
                elif kind is ToolCallChunk:
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
                elif kind is FinishChunk:
                    finish_reason = chunk.reason
                elif kind is UsageChunk:
                    usage = chunk
        except UpstreamError as error:
            if reasoning_id is not None:
                yield ReasoningEnd(message_id=reasoning_id)
            yield GenerationEnd(model=model, finish_reason="error", provider=self.adapter.provider)
            yield RunError(message=error.message, code=error.code, details=error.details())
            raise _TurnFailed from error
        if reasoning_id is not None:
            yield ReasoningEnd(message_id=reasoning_id)
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
            provider=self.adapter.provider,
            cache_write_input_tokens=usage.cache_write_input_tokens,
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


def configured_chat_turn(
    *,
    request: TurnRequest,
    adapter: ModelAdapter,
    server_actions: dict[str, ServerAction],
    before_server_action: Callable[[], Awaitable[None]] | None = None,
) -> ChatTurn:
    """The chat engine's turn as the settings configure it: the agent's loop policy (its own
    ``loop`` settings over the global ones) and the circuit breakers. The one place a turn is
    set up, for the runtime's own chat and for agents that chat (the ``llm`` kind,
    ``AgentContext.chat``)."""
    policy = loop_policy_for(request.agent_name)
    return ChatTurn(
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
        state_tools=request.state_tools and state_tools_enabled(agent_name=request.agent_name),
    )


async def chat_turn_events(turn: ChatTurn) -> AsyncIterator[Event]:
    """The turn's events; an upstream failure ends it after its RunError."""
    try:
        async for event in turn.events():
            yield event
    except _TurnFailed:
        return


async def _injected_message(text: str, role: str) -> AsyncIterator[Event]:
    """The loop's next message, streamed like any message so it is stored and shown."""
    message_id = new_message_id()
    yield TextStart(message_id=message_id, role=role)
    yield TextDelta(message_id=message_id, delta=text)
    yield TextEnd(message_id=message_id)
