"""Human-in-the-loop interrupts: how they are named, streamed and answered.

An agent pauses by emitting a meta event named ``LangGraphInterruptEvent`` (``value``: a JSON
string) or ``CopilotKitLangGraphInterruptEvent`` (``data``: ``{"value", "messages"}``). The
v1 encoder streams both in ``metaEvents``; the run ends ``interrupted`` and so does its thread
(conversations/services/runs.py), and the interrupt stays readable from the run's log
(``thread_pending_interrupt``), so a reloaded page can still answer it. The answer arrives in
the next request's ``metaEvents`` (``{"name", "value", "response"}``) and resumes the agent:
``/agents/execute`` ``metaEvents`` for remote endpoints, ``forwardedProps.command.resume`` and
``resume`` for AG-UI agents, ``AgentContext.resume`` for Python agents.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from conversations.services.runs import INTERRUPT_META_EVENT_NAMES
from copilot_runtime.events import MetaEvent

LANGGRAPH_INTERRUPT, COPILOTKIT_INTERRUPT = INTERRUPT_META_EVENT_NAMES
INTERRUPT_EVENT_NAMES = INTERRUPT_META_EVENT_NAMES
# The raw LangGraph name the TypeScript runtime also accepts for a plain interrupt.
RAW_INTERRUPT_NAME = "on_interrupt"


@dataclass(frozen=True)
class InterruptAnswer:
    """The client's answer to an interrupt, from the request's ``metaEvents``."""

    name: str
    value: str | None
    response: Any
    # AG-UI interrupt ids the answer resolves, when the agent gave ids (RUN_FINISHED outcome).
    interrupt_ids: tuple[str, ...] = field(default_factory=tuple)


def interrupt_value_text(value: Any) -> str:
    """A LangGraphInterruptEvent's ``value`` is a string; anything else is sent as JSON."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=str).decode()


def langgraph_interrupt(value: Any, *, interrupt_ids: tuple[str, ...] = ()) -> MetaEvent:
    data = {"interruptIds": list(interrupt_ids)} if interrupt_ids else None
    return MetaEvent(name=LANGGRAPH_INTERRUPT, value=interrupt_value_text(value), data=data)


def copilotkit_interrupt(value: Any, messages: list[dict[str, Any]] | None = None) -> MetaEvent:
    return MetaEvent(
        name=COPILOTKIT_INTERRUPT,
        data={"value": interrupt_value_text(value), "messages": list(messages or [])},
    )


def interrupt_answer(
    meta_events: list[dict[str, Any]], pending: list[MetaEvent] | None = None
) -> InterruptAnswer | None:
    """The answer in a request's ``metaEvents``, completed from the persisted interrupt: a
    reloaded page may answer without resending the interrupt's value."""
    for raw in meta_events:
        if not isinstance(raw, dict) or raw.get("name") not in INTERRUPT_EVENT_NAMES:
            continue
        if "response" not in raw or raw.get("response") is None:
            continue
        value = raw.get("value") or None  # GraphQL requires one: a reloaded page sends ""
        ids: list[str] = []
        for event in pending or ():
            if value is None:
                value = _pending_value(event)
            ids.extend(str(each) for each in (event.data or {}).get("interruptIds") or ())
        return InterruptAnswer(
            name=str(raw["name"]),
            value=value,
            response=raw["response"],
            interrupt_ids=tuple(ids),
        )
    return None


def _pending_value(event: MetaEvent) -> str | None:
    is_copilotkit = event.name == COPILOTKIT_INTERRUPT
    value = (event.data or {}).get("value") if is_copilotkit else event.value
    return None if value is None else interrupt_value_text(value)
