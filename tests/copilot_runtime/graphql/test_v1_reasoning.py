"""v1 clients have no reasoning message: a run's reasoning events change nothing in what the
v1 paths (the fast-path encoder, the resolver's pump) stream."""

from __future__ import annotations

import re
from typing import Any

import orjson

from copilot_runtime.events import (
    Event,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
)
from copilot_runtime.graphql.fastpath.encoder import V1Encoder
from tests.copilot_runtime.graphql.test_v1_parity import pumped

_CREATED_AT = re.compile(rb'"createdAt":"[^"]*"')

ANSWER: list[Event] = [
    TextStart(message_id="m1"),
    TextDelta(message_id="m1", delta="Four"),
    TextEnd(message_id="m1"),
    RunFinished(),
]
REASONING: list[Event] = [
    ReasoningStart(message_id="rs1"),
    ReasoningDelta(message_id="rs1", delta="Two plus two."),
    ReasoningEnd(message_id="rs1"),
]


def _wire(events: list[Event]) -> list[dict[str, Any]]:
    """What the encoder streams, its clock left out (each encoding reads the time anew)."""
    entries, _ = V1Encoder().encode(events)
    return orjson.loads(_CREATED_AT.sub(b'"createdAt":"-"', orjson.dumps(entries)))


def _shape(message: Any) -> tuple[str, str]:
    return type(message).__name__, message.id


async def test_reasoning_changes_nothing_on_the_v1_wire_or_in_the_pump() -> None:
    with_reasoning = [*REASONING, *ANSWER]
    assert _wire(with_reasoning) == _wire(ANSWER) != []
    assert "rs1" not in repr(_wire(with_reasoning))

    plain_messages, _ = await pumped(ANSWER)
    messages, metas = await pumped(with_reasoning)
    assert [_shape(m) for m in messages] == [_shape(m) for m in plain_messages] != []
    assert metas == []
