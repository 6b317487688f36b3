"""The model-based topic classifier: its prompt, its verdict, its failures, its usage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from copilot_runtime.adapters.openai_adapter import OpenAIAdapter
from copilot_runtime.guardrails.model import (
    ClassifierVerdict,
    ModelEvaluator,
    UnreadableVerdict,
    finding_from_verdict,
    parse_verdict,
)
from copilot_runtime.guardrails.verdicts import ModelUsage, decide
from tests.copilot_runtime.guardrails.helpers import allow_topic, deny_topic, subject


def adapter_for(fake_upstream: Any) -> OpenAIAdapter:
    return OpenAIAdapter(
        api_key="test",
        base_url=fake_upstream.base_url,
        model="gpt-guard",
        timeout=10,
        max_retries=0,
    )


def answer(**verdict: Any) -> dict[str, Any]:
    """A fake upstream directive answering ``verdict`` as JSON text."""
    return {"text": json.dumps(verdict)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"allowed": false, "reason": "Politics.", "topic": "politics"}', (False, "politics")),
        ('```json\n{"allowed": true, "reason": "Fine", "topic": null}\n```', (True, None)),
        ('Sure! Here it is: {"allowed": "false", "reason": "no"} Hope it helps', (False, None)),
        ('{"status": "denied", "reason": "nope"}', (False, None)),
        ('{"note": "first"} then {"verdict": "allowed"}', (True, None)),
    ],
)
def test_verdicts_are_read_robustly(text: str, expected: tuple[bool, str | None]) -> None:
    verdict = parse_verdict(text)

    assert (verdict.allowed, verdict.topic) == expected


@pytest.mark.parametrize(
    "text", ["It looks fine to me.", '{"reason": "no verdict"}', '{"allowed": "maybe"}', ""]
)
def test_an_answer_without_a_verdict_is_unreadable(text: str) -> None:
    with pytest.raises(UnreadableVerdict):
        parse_verdict(text)


USAGE = ModelUsage(model="m", usage=None)  # type: ignore[arg-type]


def test_a_denial_naming_a_denied_topic_matches_that_rule() -> None:
    rules = [deny_topic("politics"), deny_topic("sports"), allow_topic("news")]
    verdict = ClassifierVerdict(allowed=False, reason="About elections.", topic="Politics")

    found = finding_from_verdict(verdict, rules, latency_ms=5, usage=USAGE)
    decision = decide([found], fails_closed=True)

    assert found.matched == [True, None, None]
    assert decision.denied and decision.reason == "About elections."
    assert [r.verdict for r in decision.records] == ["denied", "allowed", "allowed"]


def test_an_allowed_verdict_clears_denied_topics_and_vouches_for_the_allow_list() -> None:
    rules = [deny_topic("politics"), allow_topic("cooking")]
    verdict = ClassifierVerdict(allowed=True, reason="A recipe question.", topic=None)

    found = finding_from_verdict(verdict, rules, latency_ms=5, usage=USAGE)

    assert found.matched == [False, None]
    assert found.vouched
    assert not decide([found], fails_closed=True).denied


def test_an_allowed_verdict_naming_an_allowed_topic_matches_it() -> None:
    rules = [allow_topic("cooking"), allow_topic("baking")]
    verdict = ClassifierVerdict(allowed=True, reason="", topic="baking")

    found = finding_from_verdict(verdict, rules, latency_ms=5, usage=USAGE)

    assert found.matched == [None, True]
    assert not found.vouched


def test_a_denial_with_allow_rules_only_is_the_allow_lists_refusal() -> None:
    rules = [allow_topic("cooking")]
    verdict = ClassifierVerdict(allowed=False, reason="Not about cooking.", topic=None)

    found = finding_from_verdict(verdict, rules, latency_ms=5, usage=USAGE)
    decision = decide([found], fails_closed=True)

    assert found.matched == [False] and not found.vetoed
    assert decision.denied and decision.reason == "Not about cooking."
    assert [r.verdict for r in decision.records] == ["denied"]


def test_a_denial_naming_no_denied_topic_is_a_veto() -> None:
    rules = [deny_topic("politics"), allow_topic("cooking")]
    verdict = ClassifierVerdict(allowed=False, reason="Off limits.", topic=None)

    found = finding_from_verdict(verdict, rules, latency_ms=5, usage=USAGE)

    assert found.vetoed
    assert decide([found], fails_closed=True).reason == "Off limits."


async def test_the_classifier_asks_the_configured_model_and_counts_its_tokens(
    fake_upstream: Any,
) -> None:
    fake_upstream.script(answer(allowed=False, reason="Elections are politics.", topic="politics"))
    evaluator = ModelEvaluator(adapter=adapter_for(fake_upstream), model="", timeout=5)
    rules = [deny_topic("politics"), allow_topic("news, current events")]

    found = await evaluator.evaluate(subject("Who should win the election?"), rules)

    assert found.error == ""
    assert found.matched == [True, None]
    assert found.reason == "Elections are politics."
    (sent,) = fake_upstream.requests()
    assert sent["model"] == "gpt-guard"
    assert sent["temperature"] == 0
    assert sent["max_tokens"] == 200
    system, user = sent["messages"]
    assert system["role"] == "system"
    assert '["politics"]' in system["content"]
    assert '["news, current events"]' in system["content"]
    assert user == {"role": "user", "content": "Who should win the election?"}
    assert found.model_usage is not None
    assert found.model_usage.model == "gpt-guard"
    assert found.model_usage.usage.input_tokens > 0
    assert found.model_usage.usage.output_tokens > 0


async def test_a_configured_classifier_model_overrides_the_default(fake_upstream: Any) -> None:
    fake_upstream.script(answer(allowed=True, reason="ok", topic=None))
    evaluator = ModelEvaluator(adapter=adapter_for(fake_upstream), model="tiny-guard", timeout=5)

    found = await evaluator.evaluate(subject("hi"), [deny_topic("politics")])

    assert fake_upstream.requests()[0]["model"] == "tiny-guard"
    assert found.matched == [False]


async def test_a_classifier_that_does_not_answer_in_time_fails(fake_upstream: Any) -> None:
    fake_upstream.script({"hang": True})
    evaluator = ModelEvaluator(adapter=adapter_for(fake_upstream), model="", timeout=0.3)

    found = await evaluator.evaluate(subject("hi"), [deny_topic("politics")])

    assert found.error == "the model did not answer within 0.3 s"
    assert found.matched == [None]
    assert found.latency_ms >= 300


async def test_an_upstream_error_fails_the_classifier(fake_upstream: Any) -> None:
    fake_upstream.script({"error": {"status": 500, "message": "model down"}})
    evaluator = ModelEvaluator(adapter=adapter_for(fake_upstream), model="", timeout=5)

    found = await evaluator.evaluate(subject("hi"), [deny_topic("politics")])

    assert found.error.startswith("the model call failed: ")
    assert "model down" in found.error


async def test_an_answer_that_is_not_a_verdict_fails_the_classifier(fake_upstream: Any) -> None:
    fake_upstream.script({"text": "Looks harmless to me"})
    evaluator = ModelEvaluator(adapter=adapter_for(fake_upstream), model="", timeout=5)

    found = await evaluator.evaluate(subject("hi"), [deny_topic("politics")])

    assert found.error.startswith("the model's answer is not a verdict")
    # Its tokens were spent all the same, and still count.
    assert found.model_usage is not None and found.model_usage.usage.output_tokens > 0
