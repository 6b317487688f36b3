"""How findings become one decision: deny wins, the allow list, failures, vetoes."""

from __future__ import annotations

import dataclasses

from copilot_runtime.adapters.base import UsageChunk
from copilot_runtime.guardrails.rules import ALLOW, DENY
from copilot_runtime.guardrails.verdicts import (
    ALLOWED,
    DEFAULT_DENIAL_TEXT,
    DENIED,
    ERROR,
    Finding,
    ModelUsage,
    decide,
)
from tests.copilot_runtime.guardrails.helpers import allow_topic, deny_topic, pattern


def finding(rules, matched, **options) -> Finding:
    return Finding(
        evaluator=options.pop("evaluator", "local"), rules=rules, matched=matched, **options
    )


def verdicts(decision) -> list[str]:
    return [record.verdict for record in decision.records]


def test_nothing_matched_and_no_allow_rule_allows() -> None:
    decision = decide([finding([deny_topic("politics")], [False])], fails_closed=True)

    assert not decision.denied
    assert decision.reason == ""
    assert verdicts(decision) == [ALLOWED]


def test_deny_wins_over_a_matching_allow_rule() -> None:
    rules = [allow_topic("cooking"), deny_topic("politics")]

    decision = decide([finding(rules, [True, True])], fails_closed=True)

    assert decision.denied
    assert decision.reason == 'The message is about a denied topic: "politics".'
    assert verdicts(decision) == [ALLOWED, DENIED]


def test_with_allow_rules_a_message_must_match_one() -> None:
    rules = [allow_topic("cooking"), allow_topic("baking"), deny_topic("politics")]

    refused = decide([finding(rules, [False, False, False])], fails_closed=True)
    accepted = decide([finding(rules, [False, True, False])], fails_closed=True)

    assert refused.denied
    assert refused.reason == "The message is outside the allowed topics: cooking, baking."
    assert verdicts(refused) == [DENIED, DENIED, ALLOWED]
    assert not accepted.denied
    assert verdicts(accepted) == [ALLOWED, ALLOWED, ALLOWED]


def test_the_highest_priority_denial_gives_the_reason() -> None:
    low = pattern(DENY, "secret", name="Secrets", priority=1)
    high = pattern(DENY, "password", name="Passwords", priority=10)

    decision = decide([finding([low, high], [True, True])], fails_closed=True)

    assert decision.reason == 'The message matches a denied pattern (rule "Passwords").'
    assert verdicts(decision) == [DENIED, DENIED]  # both tripped


def test_an_allow_match_by_one_evaluator_satisfies_the_allow_list_of_another() -> None:
    allow_pattern = pattern(ALLOW, r"order #\d+", name="Order numbers")
    topic_rules = [allow_topic("cooking")]

    decision = decide(
        [
            finding([allow_pattern], [True]),
            finding(topic_rules, [False], evaluator="model", reason="Not about cooking."),
        ],
        fails_closed=True,
    )

    assert not decision.denied


def test_a_failed_evaluator_refuses_when_failing_closed() -> None:
    rules = [deny_topic("politics")]
    failed = Finding.failed("model", rules, "the model did not answer within 2 s")

    decision = decide([failed], fails_closed=True)

    assert decision.denied
    assert decision.reason == (
        "Guardrails could not check this message (model: the model did not answer within 2 s)"
    )
    (record,) = decision.records
    assert (record.verdict, record.matched, record.evaluator) == (ERROR, None, "model")
    assert record.reason == "the model did not answer within 2 s"


def test_a_failed_evaluator_is_left_out_when_failing_open() -> None:
    rules = [allow_topic("cooking"), deny_topic("politics")]
    failed = Finding.failed("cloud", rules, "Copilot Cloud answered HTTP 500")

    decision = decide([failed], fails_closed=False)

    assert not decision.denied  # even the allow list does not refuse what it could not check
    assert verdicts(decision) == [ERROR, ERROR]


def test_failing_open_still_applies_what_other_evaluators_found() -> None:
    deny_pattern = pattern(DENY, "password", name="Passwords")
    failed = Finding.failed("model", [deny_topic("politics")], "the model call failed: boom")

    decision = decide([finding([deny_pattern], [True]), failed], fails_closed=False)

    assert decision.denied
    assert decision.reason == 'The message matches a denied pattern (rule "Passwords").'


def test_a_concrete_denial_is_reported_before_an_evaluator_failure() -> None:
    deny_pattern = pattern(DENY, "password", name="Passwords")
    failed = Finding.failed("model", [deny_topic("politics")], "boom")

    decision = decide([failed, finding([deny_pattern], [True])], fails_closed=True)

    assert decision.reason == 'The message matches a denied pattern (rule "Passwords").'


def test_a_veto_denies_with_the_evaluators_reason_and_trips_all_its_rules() -> None:
    rules = [allow_topic("cooking"), deny_topic("politics")]
    vetoed = Finding(evaluator="cloud", rules=rules, vetoed=True, reason="Topic not allowed")

    decision = decide([vetoed], fails_closed=True)

    assert decision.denied
    assert decision.reason == "Topic not allowed"
    assert verdicts(decision) == [DENIED, DENIED]


def test_a_vouch_satisfies_the_allow_list() -> None:
    rules = [allow_topic("cooking")]
    vouched = Finding(evaluator="cloud", rules=rules, vouched=True)

    assert not decide([vouched], fails_closed=True).denied


def test_model_usage_is_collected_from_the_findings() -> None:
    spent = ModelUsage(model="gpt-test", usage=UsageChunk(input_tokens=12, output_tokens=7))
    found = Finding(
        evaluator="model", rules=[deny_topic("politics")], matched=[False], model_usage=spent
    )

    assert decide([found], fails_closed=True).model_usage == [spent]


def test_request_supplied_rules_are_recorded_with_their_source() -> None:
    stored = deny_topic("politics", rule_id=7)
    supplied = deny_topic("sports", rule_id=None)

    decision = decide([finding([stored, supplied], [False, True])], fails_closed=True)

    assert decision.reason == 'The message is about a denied topic: "sports".'
    assert [(r.rule.source, r.verdict) for r in decision.records] == [
        ("stored", ALLOWED),
        ("request", DENIED),
    ]


# --- what the end user is told ------------------------------------------------------------------


def test_the_end_user_is_told_the_deciding_rules_own_text_or_the_default() -> None:
    named = dataclasses.replace(
        pattern(DENY, r"\d{3}-\d{2}", name="SSNs", priority=5), denial_text="No ID numbers."
    )
    plain = pattern(DENY, "secret", name="Secrets")

    by_named = decide([finding([plain, named], [True, True])], fails_closed=True)
    by_plain = decide([finding([plain], [True])], fails_closed=True)

    assert by_named.reason == 'The message matches a denied pattern (rule "SSNs").'
    assert by_named.user_text == "No ID numbers."
    assert by_plain.user_text == DEFAULT_DENIAL_TEXT
    assert "Secrets" not in by_plain.user_text


def test_failures_and_the_allow_list_tell_the_end_user_no_internals() -> None:
    failed = decide([Finding.failed("model", [deny_topic("politics")], "boom")], fails_closed=True)
    outside = decide([finding([allow_topic("cooking")], [False])], fails_closed=True)

    assert "boom" in failed.reason and failed.user_text == DEFAULT_DENIAL_TEXT
    assert "cooking" in outside.reason and outside.user_text == DEFAULT_DENIAL_TEXT


def test_a_refusal_by_the_requests_own_topics_keeps_its_reason() -> None:
    # The client sent those topics (cloud.guardrails.inputValidationRules): nothing internal.
    decision = decide([finding([deny_topic("sports", rule_id=None)], [True])], fails_closed=True)

    assert decision.user_text == decision.reason == 'The message is about a denied topic: "sports".'
