"""What a run's log adds to its stored messages in the session inspector: the interrupts it
recorded, and the model's reasoning for runs from before reasoning was stored as messages of
its own (migration 0015): their log is all that holds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conversations.models import RunEvent

# The run log's events the transcript shows besides the messages.
_SHOWN_EVENTS = ("meta_event", "reasoning_start", "reasoning_delta", "reasoning_end")


@dataclass(frozen=True, slots=True)
class ReasoningBlock:
    text: str
    signed: bool  # it carries what replays it to the provider (Anthropic's signature)


@dataclass(slots=True)
class RunLog:
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    reasoning: list[ReasoningBlock] = field(default_factory=list)  # in order; taken when shown


def run_logs(*, run_ids: list[str]) -> dict[str, RunLog]:
    logs: dict[str, RunLog] = {}
    logged = (
        RunEvent.objects.filter(run_id__in=run_ids, type__in=_SHOWN_EVENTS)
        .order_by("run_id", "seq")
        .values_list("run_id", "type", "payload")
    )
    texts: dict[str, list[str]] = {}
    for run_id, event_type, payload in logged:
        log = logs.setdefault(run_id, RunLog())
        payload = payload or {}
        if event_type == "meta_event":
            log.interrupts.append(payload)
            continue
        message_id = str(payload.get("message_id"))
        if event_type == "reasoning_start":
            texts[message_id] = []
        elif event_type == "reasoning_delta":
            texts.setdefault(message_id, []).append(str(payload.get("delta") or ""))
        else:
            text = "".join(texts.pop(message_id, []))
            log.reasoning.append(
                ReasoningBlock(text=text, signed=bool(payload.get("encrypted_value")))
            )
    return logs
