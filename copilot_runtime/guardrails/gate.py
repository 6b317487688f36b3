"""The gate: checks a turn's last user message, before the turn or beside it.

``blocking`` (the default): the decision comes first, and a denial means no model call at all.
``parallel``: the turn starts at once and the check runs beside it; a denial cancels the turn
(the model's stream is closed and the message being streamed fails). Either way no server
action runs before the message is allowed: the turn awaits the verdict before executing one.

A denial is the canonical ``RunError`` with code ``GUARDRAILS_VALIDATION_FAILED``. Every rule
checked is recorded, after the decision and off the streaming path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from conversations.store.health import db_sync_to_async
from conversations.store.types import turn_committed
from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.events import Event, GuardrailDecision
from copilot_runtime.events.request import TurnRequest
from copilot_runtime.guardrails.cloud import CloudEvaluator
from copilot_runtime.guardrails.config import (
    AUTO,
    BLOCKING,
    CLOUD,
    LOCAL,
    MODEL,
    GuardrailsConfig,
    guardrails_config,
)
from copilot_runtime.guardrails.errors import denial_error
from copilot_runtime.guardrails.local import LocalEvaluator
from copilot_runtime.guardrails.model import ModelEvaluator
from copilot_runtime.guardrails.records import guardrail_decision_store
from copilot_runtime.guardrails.rules import (
    RuleSpec,
    Subject,
    request_wants_cloud,
    rules_for_turn_cached,
    subject_from_request,
)
from copilot_runtime.guardrails.verdicts import Decision, Finding, decide

logger = logging.getLogger(__name__)

DEMO_ADAPTER_NAME = "demo"

# Awaited by the turn before it executes a server action; raises GuardrailDenied on a denial.
ServerActionCheck = Callable[[], Awaitable[None]]
GuardedTurn = Callable[[ServerActionCheck | None], Awaitable[None]]


class GuardrailDenied(Exception):
    """Raised into a turn that reached a server action of a denied message."""


class Evaluator(Protocol):
    name: str

    async def evaluate(self, subject: Subject, rules: Sequence[RuleSpec]) -> Finding: ...


def cloud_key(config: GuardrailsConfig, request: TurnRequest) -> str:
    """The operator's key first, else the one the client sent in its request header."""
    return config.cloud_public_api_key or request.cloud_public_api_key


def topic_evaluator(
    config: GuardrailsConfig, request: TurnRequest, adapter: ModelAdapter
) -> Evaluator:
    """Who checks topic rules (pattern rules are always checked locally)."""
    choice = config.evaluator
    if choice == AUTO:
        if config.cloud_public_api_key or (
            request.cloud_public_api_key and request_wants_cloud(request.cloud)
        ):
            choice = CLOUD
        elif getattr(adapter, "name", "") != DEMO_ADAPTER_NAME:
            choice = MODEL
        else:
            choice = LOCAL
    if choice == CLOUD:
        return CloudEvaluator(
            base_url=config.cloud_base_url,
            public_api_key=cloud_key(config, request),
            timeout=config.timeout_seconds,
        )
    if choice == MODEL:
        return ModelEvaluator(adapter=adapter, model=config.model, timeout=config.timeout_seconds)
    return LocalEvaluator(timeout=config.timeout_seconds)


async def _evaluate(evaluator: Evaluator, subject: Subject, rules: list[RuleSpec]) -> Finding:
    """An evaluator's finding; an unexpected exception is a failure of that evaluator."""
    started = time.perf_counter()
    try:
        return await evaluator.evaluate(subject, rules)
    except Exception as error:
        logger.exception("guardrails evaluator %s failed", evaluator.name)
        latency = int((time.perf_counter() - started) * 1000)
        return Finding.failed(
            evaluator.name, rules, f"unexpected {type(error).__name__}", latency_ms=latency
        )


class GuardrailGate:
    """The guardrails of one turn: read the rules, evaluate, announce and store the decision."""

    def __init__(
        self,
        *,
        config: GuardrailsConfig,
        request: TurnRequest,
        subject: Subject,
        run_id: str,
        adapter: ModelAdapter,
        emit: Callable[[Event], None],
        stored: asyncio.Future[None] | None = None,
    ) -> None:
        self.config = config
        self.request = request
        self.subject = subject
        self.run_id = run_id
        self.adapter = adapter
        self.emit = emit
        # The turn's write, when the run started before it committed (the decision's row
        # refers to the run's).
        self.stored = stored
        self._storing: asyncio.Task[None] | None = None

    async def decide(self) -> Decision | None:
        """The decision; None when no rule is in scope (nothing is recorded then)."""
        started = time.perf_counter()
        rules = await rules_for_turn_cached(request=self.request)
        if not rules:
            return None
        topic_checker = topic_evaluator(self.config, self.request, self.adapter)
        if topic_checker.name == LOCAL:
            plan: list[tuple[Evaluator, list[RuleSpec]]] = [(topic_checker, rules)]
        else:
            patterns = [rule for rule in rules if not rule.is_topic]
            topics = [rule for rule in rules if rule.is_topic]
            local = LocalEvaluator(timeout=self.config.timeout_seconds)
            plan = [(local, patterns), (topic_checker, topics)]
        findings = await asyncio.gather(
            *(_evaluate(evaluator, self.subject, chosen) for evaluator, chosen in plan if chosen)
        )
        decision = decide(findings, fails_closed=self.config.fails_closed)
        self.emit(self._decision_event(decision, findings, started))
        self._storing = asyncio.create_task(self._store(decision))
        return decision

    def _decision_event(
        self, decision: Decision, findings: Sequence[Finding], started: float
    ) -> GuardrailDecision:
        event = GuardrailDecision(
            denied=decision.denied,
            reason=decision.reason,
            mode=self.config.mode,
            evaluators=",".join(finding.evaluator for finding in findings),
            rules=len(decision.records),
            latency_ms=int((time.perf_counter() - started) * 1000),
        )
        for spent in decision.model_usage:
            event.model = event.model or spent.model
            event.input_tokens += spent.usage.input_tokens
            event.output_tokens += spent.usage.output_tokens
            event.cached_input_tokens += spent.usage.cached_input_tokens
            event.cache_write_input_tokens += spent.usage.cache_write_input_tokens
            event.reasoning_tokens += spent.usage.reasoning_tokens
        return event

    async def _store(self, decision: Decision) -> None:
        if not await turn_committed(self.stored):
            return  # the run's turn was never stored, and nor is its decision
        try:
            await db_sync_to_async(guardrail_decision_store)(
                run_id=self.run_id,
                agent_name=self.request.agent_name,
                mode=self.config.mode,
                decision=decision,
                message_id=self.subject.message_id,
            )
        except Exception:  # the record must not fail the run
            logger.exception("storing the guardrails decision of run %s failed", self.run_id)

    async def settle(self) -> None:
        """Wait until the decision is stored (it is written off the streaming path)."""
        if self._storing is not None:
            await asyncio.shield(self._storing)


async def run_guarded(
    *,
    request: TurnRequest,
    run_id: str,
    adapter: ModelAdapter,
    emit: Callable[[Event], None],
    turn: GuardedTurn,
    stored: asyncio.Future[None] | None = None,
) -> None:
    """Run ``turn`` under the guardrails in scope for ``request``. ``turn`` receives the check
    it must await before executing a server action (None when none is needed). ``stored``:
    the turn's write, when the run started before it committed."""
    config = guardrails_config()
    subject = subject_from_request(request) if config.enabled else None
    if subject is None:
        await turn(None)
        return
    gate = GuardrailGate(
        config=config,
        request=request,
        subject=subject,
        run_id=run_id,
        adapter=adapter,
        emit=emit,
        stored=stored,
    )
    try:
        if config.mode == BLOCKING:
            decision = await gate.decide()
            if decision is not None and decision.denied:
                emit(denial_error(decision.user_text))
                return
            await turn(None)
        else:
            await _run_parallel(gate, turn, emit)
    finally:
        await gate.settle()


async def _cancel(task: asyncio.Task[Any]) -> None:
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def _run_parallel(
    gate: GuardrailGate, turn: GuardedTurn, emit: Callable[[Event], None]
) -> None:
    verdict = asyncio.create_task(gate.decide())

    async def before_server_action() -> None:
        decision = await asyncio.shield(verdict)
        if decision is not None and decision.denied:
            raise GuardrailDenied(decision.user_text)

    body = asyncio.create_task(turn(before_server_action))
    try:
        await asyncio.wait({body, verdict}, return_when=asyncio.FIRST_COMPLETED)
        if verdict.done():
            decision = verdict.result()
            if decision is not None and decision.denied:
                await _cancel(body)  # closes the model's stream; its open message fails
                emit(denial_error(decision.user_text))
                return
        with contextlib.suppress(GuardrailDenied):
            await body
        decision = await verdict
        if decision is not None and decision.denied:
            emit(denial_error(decision.user_text))
    finally:
        await _cancel(body)
        await _cancel(verdict)
