"""A guardrails decision is stored only once the run it refers to is: a run may start while
its turn's write is still in flight (the inline executor), and a write that fails leaves no
run for the decision to refer to."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from copilot_runtime.guardrails import gate

DECISION = cast(Any, "a decision")  # handed to the (replaced) record function as it is


def _gate(stored: asyncio.Future[None] | None) -> gate.GuardrailGate:
    return gate.GuardrailGate(
        config=cast(Any, SimpleNamespace(mode="parallel")),
        request=cast(Any, SimpleNamespace(agent_name="default")),
        subject=cast(Any, SimpleNamespace(message_id="u1")),
        run_id="run-1",
        adapter=cast(Any, None),
        emit=lambda event: None,
        stored=stored,
    )


@pytest.fixture
def stored_decisions(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(gate, "guardrail_decision_store", lambda **kwargs: calls.append(kwargs))
    return calls


async def test_the_decision_waits_for_the_turns_write(
    stored_decisions: list[dict[str, Any]],
) -> None:
    stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    storing = asyncio.create_task(_gate(stored)._store(decision=DECISION))
    await asyncio.sleep(0.05)
    assert stored_decisions == []
    stored.set_result(None)
    await asyncio.wait_for(storing, 5)
    assert [call["run_id"] for call in stored_decisions] == ["run-1"]


async def test_no_decision_is_stored_for_a_turn_whose_write_failed(
    stored_decisions: list[dict[str, Any]],
) -> None:
    stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stored.set_exception(RuntimeError("raced"))
    await _gate(stored)._store(decision=DECISION)
    assert stored_decisions == []


async def test_a_turn_stored_before_its_run_started_stores_the_decision_at_once(
    stored_decisions: list[dict[str, Any]],
) -> None:
    await _gate(None)._store(decision=DECISION)
    assert len(stored_decisions) == 1
