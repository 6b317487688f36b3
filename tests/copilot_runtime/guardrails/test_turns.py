"""Guardrails around a real turn (in-process executor, fake upstream): blocking and parallel
modes, the denial as the engine reports and stores it, evaluator failures, usage, records."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from conversations.models import Message, Run, RunStatus, Thread
from copilot_runtime.events import (
    ActionEnd,
    ActionResult,
    Event,
    GenerationEnd,
    GuardrailDecision,
    RunError,
    RunFinished,
    TextDelta,
    TextEnd,
)
from copilot_runtime.events.request import TurnRequest
from copilot_runtime.guardrails import gate
from copilot_runtime.guardrails.rules import RuleSpec, Subject
from copilot_runtime.guardrails.verdicts import DEFAULT_DENIAL_TEXT, Finding
from copilot_runtime.models import GuardrailEvaluation, GuardrailRule
from copilot_runtime.runs.start import StartedTurn, turn_start
from tests.copilot_runtime.guardrails.helpers import cloud_lists, turn_request, user_text
from tests.support.cloud_guardrails import CloudGuardrailsStandIn
from tests.support.generate_e2e import prompt_words

pytestmark = pytest.mark.django_db(transaction=True)

GUARDRAILS_CODE = "GUARDRAILS_VALIDATION_FAILED"
INTERRUPTED = "Interrupted due to Guardrails validation failure. Reason: "

Configure = Callable[..., None]


@pytest.fixture
def configure(fake_upstream: Any) -> Iterator[Configure]:
    """Point the runtime at the fake upstream, with guardrails settings on top."""
    with contextlib.ExitStack() as stack:

        def apply(**settings: Any) -> None:
            stack.enter_context(
                override_settings(
                    COPILOT_RUNTIME={
                        "OPENAI_API_KEY": "test",
                        "OPENAI_BASE_URL": fake_upstream.base_url,
                        "OPENAI_MAX_RETRIES": 0,
                        "ACTIONS": ["tests.support.actions.server_add"],
                        "EVENT_FLUSH_MS": 5,
                        "GUARDRAILS_EVALUATOR": "local",
                        **settings,
                    }
                )
            )

        yield apply


async def add_rule(name: str, **fields: Any) -> GuardrailRule:
    defaults: dict[str, Any] = {"kind": "deny", "match": "topic", "text": name}
    return await GuardrailRule.objects.acreate(name=name, **{**defaults, **fields})


def ask(text: str, **options: Any) -> TurnRequest:
    return turn_request(user_text("u1", text), **options)


async def start(request: TurnRequest) -> StartedTurn:
    return await turn_start(user=AnonymousUser(), request=request, protocol="graphql")


async def events_until_finished(started: StartedTurn) -> list[Event]:
    events: list[Event] = []
    while (event := await asyncio.wait_for(started.events.get(), 15)) is not None:
        events.append(event)
    return events


async def run_ended(run_id: str) -> Run:
    for _ in range(400):
        run = await Run.objects.aget(pk=run_id)
        if run.is_finished and run.finished_at:
            return run
        await asyncio.sleep(0.025)
    raise AssertionError(f"run {run_id} did not end")


async def evaluations(run_id: str) -> list[GuardrailEvaluation]:
    return [e async for e in GuardrailEvaluation.objects.filter(run_id=run_id).order_by("pk")]


async def stored(message_id: str) -> Message:
    return await Message.objects.aget(thread__thread_id="thread-guard", message_id=message_id)


def only(events: Sequence[Event], kind: type[Event]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


# --- blocking -----------------------------------------------------------------------------------


async def test_a_denial_in_blocking_mode_makes_no_model_call(
    configure: Configure, fake_upstream: Any
) -> None:
    configure()
    told = "Please leave out identity numbers."
    rule = await add_rule("SSNs", match="pattern", text=r"\b\d{3}-\d{2}-\d{4}\b", denial_text=told)
    await add_rule("cooking", kind="allow", text="cooking, recipes", priority=-1)

    started = await start(ask("Here is my number: 123-45-6789, cooking recipes"))
    events = await events_until_finished(started)

    reason = 'The message matches a denied pattern (rule "SSNs").'
    assert fake_upstream.requests() == []
    # The run's log names the rule; the end user is told the rule's own text.
    (decision,) = only(events, GuardrailDecision)
    assert decision.denied and decision.reason == reason and decision.mode == "blocking"
    (error,) = only(events, RunError)
    assert (error.code, error.message, error.details) == (
        GUARDRAILS_CODE,
        told,
        {"guardrailsReason": told},
    )
    assert isinstance(events[-1], RunFinished) and events[-1].status == "failed"

    run = await run_ended(started.run_id)
    assert run.status == RunStatus.FAILED
    assert run.error_code == GUARDRAILS_CODE
    assert run.error_details == {"message": told, "guardrailsReason": told}
    assert (run.input_tokens, run.output_tokens) == (0, 0)
    user_message = await stored("u1")
    assert user_message.status == "failed"
    assert user_message.status_reason == f"denied by guardrails: {reason}"
    assert await Message.objects.filter(thread__thread_id="thread-guard").acount() == 1

    denied, allowed = await evaluations(started.run_id)
    assert (denied.rule_id, denied.verdict, denied.matched, denied.evaluator) == (
        rule.pk,
        "denied",
        True,
        "local",
    )
    assert (denied.mode, denied.source, denied.agent_name) == ("blocking", "stored", "default")
    assert denied.reason == reason
    assert (allowed.verdict, allowed.matched) == ("allowed", True)


async def test_an_allowed_message_runs_the_turn_and_is_recorded(
    configure: Configure, fake_upstream: Any
) -> None:
    configure()
    await add_rule("politics")
    await add_rule("cooking", kind="allow", text="cooking, recipes")

    started = await start(ask("Any good pasta recipes?"))
    events = await events_until_finished(started)

    (decision,) = only(events, GuardrailDecision)
    assert not decision.denied and decision.rules == 2
    assert only(events, RunError) == []
    assert len(fake_upstream.requests()) == 1
    assert (await run_ended(started.run_id)).status == RunStatus.SUCCEEDED
    assert (await stored("u1")).status == "success"
    records = {e.rule_text: (e.verdict, e.matched) for e in await evaluations(started.run_id)}
    assert records == {"politics": ("allowed", False), "cooking, recipes": ("allowed", True)}


async def test_a_denied_message_does_not_title_its_thread_and_the_next_allowed_one_does(
    configure: Configure, fake_upstream: Any
) -> None:
    configure()
    await add_rule("passwords", match="pattern", text="password")
    fake_upstream.script({"text": "Sure."})

    denied = await start(ask("my password is hunter2"))
    await events_until_finished(denied)
    await run_ended(denied.run_id)
    assert (await Thread.objects.aget(thread_id="thread-guard")).title == ""
    # The client sends the denied message again, with a new one.
    allowed = await start(
        turn_request(
            user_text("u1", "my password is hunter2"), user_text("u2", "Plan a trip to Porto")
        )
    )
    await events_until_finished(allowed)

    assert (await run_ended(allowed.run_id)).status == RunStatus.SUCCEEDED
    assert (await Thread.objects.aget(thread_id="thread-guard")).title == "Plan a trip to Porto"


async def test_with_an_allow_rule_in_scope_an_unmatched_message_is_denied(
    configure: Configure, fake_upstream: Any
) -> None:
    configure()
    await add_rule("cooking", kind="allow", text="cooking, recipes")

    events = await events_until_finished(await start(ask("Who won the game last night?")))

    (error,) = only(events, RunError)
    assert error.message == DEFAULT_DENIAL_TEXT
    (decision,) = only(events, GuardrailDecision)
    assert decision.reason == "The message is outside the allowed topics: cooking, recipes."
    assert fake_upstream.requests() == []


async def test_rules_of_another_agent_and_disabled_rules_do_not_apply(
    configure: Configure, fake_upstream: Any
) -> None:
    configure()
    await add_rule("politics", agent_name="campaign-bot")
    await add_rule("elections", enabled=False)

    started = await start(ask("Tell me about politics and elections"))
    events = await events_until_finished(started)

    assert only(events, RunError) == []
    assert only(events, GuardrailDecision) == []  # no rule in scope: nothing to decide
    assert await GuardrailEvaluation.objects.acount() == 0
    assert len(fake_upstream.requests()) == 1


async def test_without_rules_in_scope_nothing_is_checked_or_recorded(
    configure: Configure, fake_upstream: Any
) -> None:
    configure()

    events = await events_until_finished(await start(ask("hello")))

    assert only(events, GuardrailDecision) == []
    assert await GuardrailEvaluation.objects.acount() == 0
    assert len(fake_upstream.requests()) == 1


async def test_switched_off_guardrails_look_up_nothing(
    configure: Configure, fake_upstream: Any
) -> None:
    configure(GUARDRAILS_ENABLED=False)
    await add_rule("politics")

    events = await events_until_finished(await start(ask("politics!")))

    assert only(events, GuardrailDecision) == [] and only(events, RunError) == []


async def test_the_requests_own_deny_list_is_merged_with_stored_rules(
    configure: Configure, fake_upstream: Any
) -> None:
    configure()
    await add_rule("politics")

    started = await start(
        ask("Who will win the Super Bowl?", cloud=cloud_lists(deny=["super bowl"]))
    )
    events = await events_until_finished(started)

    (error,) = only(events, RunError)
    assert error.message == 'The message is about a denied topic: "super bowl".'
    stored_rule, supplied = await evaluations(started.run_id)
    assert (stored_rule.source, stored_rule.verdict) == ("stored", "allowed")
    assert (supplied.source, supplied.rule_id, supplied.rule_text, supplied.verdict) == (
        "request",
        None,
        "super bowl",
        "denied",
    )


async def test_a_mis_set_mode_fails_the_run_with_a_configuration_error(
    configure: Configure, fake_upstream: Any
) -> None:
    configure(GUARDRAILS_MODE="sometimes")

    events = await events_until_finished(await start(ask("hello")))

    (error,) = only(events, RunError)
    assert error.code == "CONFIGURATION_ERROR"
    assert "GUARDRAILS_MODE" in error.message
    assert fake_upstream.requests() == []


# --- the model classifier -----------------------------------------------------------------------


async def test_the_classifiers_tokens_count_in_the_runs_usage(
    configure: Configure, fake_upstream: Any
) -> None:
    configure(GUARDRAILS_EVALUATOR="model")
    await add_rule("politics")
    fake_upstream.script(
        {"text": '{"allowed": true, "reason": "A cooking question.", "topic": null}'},
        {"text": "Boil the pasta for nine minutes."},
    )

    started = await start(ask("How long do I boil pasta?"))
    events = await events_until_finished(started)

    classifier, turn = fake_upstream.requests()
    assert classifier["messages"][0]["role"] == "system"
    (decision,) = only(events, GuardrailDecision)
    (generation,) = only(events, GenerationEnd)
    assert decision.evaluators == "model" and not decision.denied
    assert decision.input_tokens == prompt_words(classifier) > 0
    assert decision.output_tokens > 0
    run = await run_ended(started.run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.input_tokens == prompt_words(classifier) + prompt_words(turn)
    assert run.output_tokens == decision.output_tokens + generation.output_tokens
    (record,) = await evaluations(started.run_id)
    assert (record.evaluator, record.verdict, record.matched) == ("model", "allowed", False)


async def test_a_classifier_denial_makes_no_turn_model_call(
    configure: Configure, fake_upstream: Any
) -> None:
    configure(GUARDRAILS_EVALUATOR="model")
    await add_rule("politics")
    fake_upstream.script(
        {"text": '{"allowed": false, "reason": "Elections are politics.", "topic": "politics"}'}
    )

    started = await start(ask("Who should I vote for?"))
    events = await events_until_finished(started)

    assert len(fake_upstream.requests()) == 1  # the classifier only
    (error,) = only(events, RunError)
    assert error.message == DEFAULT_DENIAL_TEXT  # the classifier's words name the admin's topic
    run = await run_ended(started.run_id)
    assert run.input_tokens > 0  # the classifier's call is still paid for
    (record,) = await evaluations(started.run_id)
    assert (record.verdict, record.matched, record.reason) == (
        "denied",
        True,
        "Elections are politics.",
    )


@pytest.mark.parametrize("fail", ["closed", "open"])
async def test_a_failing_classifier_fails_closed_or_open(
    configure: Configure, fake_upstream: Any, fail: str
) -> None:
    configure(GUARDRAILS_EVALUATOR="model", GUARDRAILS_FAIL=fail)
    await add_rule("politics")
    fake_upstream.script({"error": {"status": 500, "message": "classifier down"}})

    started = await start(ask("Hello there"))
    events = await events_until_finished(started)

    (record,) = await evaluations(started.run_id)
    assert record.verdict == "error"
    assert "classifier down" in record.reason
    if fail == "closed":
        (error,) = only(events, RunError)
        assert (error.code, error.message) == (GUARDRAILS_CODE, DEFAULT_DENIAL_TEXT)
        (decision,) = only(events, GuardrailDecision)
        assert decision.reason.startswith("Guardrails could not check this message (model: ")
        assert len(fake_upstream.requests()) == 1
    else:
        assert only(events, RunError) == []
        assert len(fake_upstream.requests()) == 2
        assert (await run_ended(started.run_id)).status == RunStatus.SUCCEEDED


async def test_a_classifier_timeout_fails_closed_with_a_clear_reason(
    configure: Configure, fake_upstream: Any
) -> None:
    configure(GUARDRAILS_EVALUATOR="model", GUARDRAILS_TIMEOUT_SECONDS=0.3)
    await add_rule("politics")
    fake_upstream.script({"hang": True})

    events = await events_until_finished(await start(ask("Hello there")))

    (error,) = only(events, RunError)
    assert error.message == DEFAULT_DENIAL_TEXT
    (decision,) = only(events, GuardrailDecision)
    assert decision.reason == (
        "Guardrails could not check this message (model: the model did not answer within 0.3 s)"
    )


# --- Copilot Cloud ------------------------------------------------------------------------------


async def test_auto_uses_copilot_cloud_for_a_request_that_asks_for_it_with_its_key(
    configure: Configure, fake_upstream: Any
) -> None:
    with CloudGuardrailsStandIn() as cloud:
        configure(GUARDRAILS_EVALUATOR="auto", COPILOT_CLOUD_BASE_URL=cloud.base_url)
        cloud.reply({"status": "denied", "reason": "Topic not allowed"})
        request = ask("Talk politics", cloud=cloud_lists(allow=["cooking"], deny=["politics"]))
        request.cloud_public_api_key = "ck_pub_client"
        await add_rule("SSNs", match="pattern", text=r"\d{3}-\d{2}-\d{4}")

        started = await start(request)
        events = await events_until_finished(started)

    (sent,) = cloud.requests
    assert sent.headers["x-copilotcloud-public-api-key"] == "ck_pub_client"
    assert (sent.body["validTopics"], sent.body["invalidTopics"]) == (["cooking"], ["politics"])
    (error,) = only(events, RunError)
    assert (error.code, error.message) == (GUARDRAILS_CODE, "Topic not allowed")
    assert fake_upstream.requests() == []
    records = await evaluations(started.run_id)
    assert [(r.evaluator, r.rule_text, r.verdict) for r in records] == [
        ("local", r"\d{3}-\d{2}-\d{4}", "allowed"),
        ("cloud", "politics", "denied"),
        ("cloud", "cooking", "denied"),
    ]


async def test_a_configured_key_sends_every_turn_to_copilot_cloud(
    configure: Configure, fake_upstream: Any
) -> None:
    with CloudGuardrailsStandIn() as cloud:
        configure(
            GUARDRAILS_EVALUATOR="auto",
            COPILOT_CLOUD_BASE_URL=cloud.base_url,
            COPILOT_CLOUD_PUBLIC_API_KEY="ck_pub_operator",
        )
        cloud.reply({"status": "allowed"})
        await add_rule("politics")

        started = await start(ask("Pasta?"))
        await events_until_finished(started)

    assert cloud.requests[0].headers["x-copilotcloud-public-api-key"] == "ck_pub_operator"
    assert (await run_ended(started.run_id)).status == RunStatus.SUCCEEDED


async def test_auto_without_a_key_uses_the_model(configure: Configure, fake_upstream: Any) -> None:
    configure(GUARDRAILS_EVALUATOR="auto")
    await add_rule("politics")
    fake_upstream.script({"text": '{"allowed": true, "reason": "fine"}'}, {"text": "Hi!"})

    started = await start(ask("Hello"))
    await events_until_finished(started)

    assert len(fake_upstream.requests()) == 2
    (record,) = await evaluations(started.run_id)
    assert record.evaluator == "model"


# --- parallel -----------------------------------------------------------------------------------


class HeldEvaluator:
    """A topic evaluator whose verdict waits until the test releases it."""

    name = "model"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.deny_reason = ""
        self.called = asyncio.Event()

    async def evaluate(self, subject: Subject, rules: Sequence[RuleSpec]) -> Finding:
        self.called.set()
        await self.release.wait()
        if self.deny_reason:
            return Finding(
                evaluator="model", rules=list(rules), vetoed=True, reason=self.deny_reason
            )
        return Finding(evaluator="model", rules=list(rules), matched=[False] * len(rules))

    def decide(self, *, deny: str = "") -> None:
        self.deny_reason = deny
        self.release.set()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> HeldEvaluator:
    evaluator = HeldEvaluator()
    monkeypatch.setattr(gate, "topic_evaluator", lambda *args: evaluator)
    return evaluator


async def collect_until(
    started: StartedTurn, events: list[Event], done: Callable[[list[Event]], bool]
) -> None:
    while not done(events):
        event = await asyncio.wait_for(started.events.get(), 15)
        assert event is not None, f"the run ended early: {events}"
        events.append(event)


async def test_a_parallel_denial_stops_the_model_and_fails_the_streaming_message(
    configure: Configure, fake_upstream: Any, held: HeldEvaluator
) -> None:
    configure(GUARDRAILS_MODE="parallel", GUARDRAILS_EVALUATOR="model")
    await add_rule("politics", denial_text="Let's talk about something else.")
    fake_upstream.script({"tokens": 400, "delay_ms": 10})
    closed_before = fake_upstream.stats()["client_closed"]

    started = await start(ask("Politics, please"))
    events: list[Event] = []
    await collect_until(started, events, lambda seen: len(only(seen, TextDelta)) >= 3)
    held.decide(deny="Politics is off limits.")
    events += await events_until_finished(started)

    reason, told = "Politics is off limits.", "Let's talk about something else."
    assert only(events, TextEnd) == []
    (decision,) = only(events, GuardrailDecision)
    assert decision.denied and decision.mode == "parallel" and decision.reason == reason
    (error,) = only(events, RunError)
    assert (error.code, error.message) == (GUARDRAILS_CODE, told)
    assert len(only(events, TextDelta)) < 400

    run = await run_ended(started.run_id)
    assert (run.status, run.error_code) == (RunStatus.FAILED, GUARDRAILS_CODE)
    assistant = await Message.objects.aget(thread__thread_id="thread-guard", role="assistant")
    assert (assistant.status, assistant.status_reason) == ("failed", INTERRUPTED + told)
    assert assistant.content.startswith("t0 t1 t2")
    assert (await stored("u1")).status_reason == f"denied by guardrails: {reason}"
    for _ in range(100):  # the model's stream was closed, not read to its end
        if fake_upstream.stats()["client_closed"] > closed_before:
            break
        await asyncio.sleep(0.02)
    assert fake_upstream.stats()["client_closed"] > closed_before
    (record,) = await evaluations(started.run_id)
    assert (record.mode, record.evaluator, record.verdict) == ("parallel", "model", "denied")


async def test_in_parallel_mode_no_server_action_runs_before_the_verdict(
    configure: Configure, fake_upstream: Any, held: HeldEvaluator
) -> None:
    configure(GUARDRAILS_MODE="parallel", GUARDRAILS_EVALUATOR="model")
    await add_rule("politics")
    fake_upstream.script({"tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 2}}]})

    started = await start(ask("Add one and two"))
    events: list[Event] = []
    await collect_until(started, events, lambda seen: bool(only(seen, ActionEnd)))
    await asyncio.sleep(0.2)  # the turn is now waiting for the verdict
    while not started.events.empty():
        events.append(started.events.get_nowait())
    assert only(events, ActionResult) == [] and not isinstance(events[-1], RunFinished)
    held.decide(deny="No arithmetic today.")
    events += await events_until_finished(started)

    assert only(events, ActionResult) == []
    assert len(fake_upstream.requests()) == 1
    (error,) = only(events, RunError)
    assert error.message == DEFAULT_DENIAL_TEXT
    kinds = [
        m.kind
        async for m in Message.objects.filter(thread__thread_id="thread-guard").order_by("position")
    ]
    assert kinds == ["text", "action_execution"]  # the call is kept, no result


async def test_in_parallel_mode_an_allowed_verdict_lets_the_server_action_run(
    configure: Configure, fake_upstream: Any, held: HeldEvaluator
) -> None:
    configure(GUARDRAILS_MODE="parallel", GUARDRAILS_EVALUATOR="model")
    await add_rule("politics")
    fake_upstream.script(
        {"tool_calls": [{"name": "serverAdd", "arguments": {"a": 1, "b": 2}}]},
        {"text": "It is 3."},
    )

    started = await start(ask("Add one and two"))
    events: list[Event] = []
    await collect_until(started, events, lambda seen: bool(only(seen, ActionEnd)))
    await asyncio.sleep(0.1)
    assert only(events, ActionResult) == []
    held.decide()
    events += await events_until_finished(started)

    (result,) = only(events, ActionResult)
    assert json.loads(result.result) == {"sum": 3}
    assert only(events, RunError) == []
    assert (await run_ended(started.run_id)).status == RunStatus.SUCCEEDED


async def test_a_parallel_denial_after_the_reply_still_fails_the_run(
    configure: Configure, fake_upstream: Any, held: HeldEvaluator
) -> None:
    configure(GUARDRAILS_MODE="parallel", GUARDRAILS_EVALUATOR="model")
    await add_rule("politics")
    fake_upstream.script({"text": "A short reply."})

    started = await start(ask("Politics?"))
    events: list[Event] = []
    await collect_until(started, events, lambda seen: bool(only(seen, TextEnd)))
    held.decide(deny="Too late, but still no.")
    events += await events_until_finished(started)

    (error,) = only(events, RunError)
    assert error.message == DEFAULT_DENIAL_TEXT
    run = await run_ended(started.run_id)
    assert run.status == RunStatus.FAILED
    assistant = await Message.objects.aget(thread__thread_id="thread-guard", role="assistant")
    assert assistant.status == "success"  # it had finished before the verdict


async def test_stopping_a_parallel_run_stops_its_evaluation_too(
    configure: Configure, fake_upstream: Any, held: HeldEvaluator
) -> None:
    configure(GUARDRAILS_MODE="parallel", GUARDRAILS_EVALUATOR="model")
    await add_rule("politics")
    fake_upstream.script({"tokens": 400, "delay_ms": 10})

    started = await start(ask("Politics"))
    events: list[Event] = []
    await collect_until(started, events, lambda seen: bool(only(seen, TextDelta)))
    await asyncio.wait_for(held.called.wait(), 5)
    assert await started.cancel() is True
    events += await events_until_finished(started)

    run = await run_ended(started.run_id)
    assert run.status == RunStatus.CANCELLED
    assert only(events, GuardrailDecision) == []
    assert await GuardrailEvaluation.objects.acount() == 0
