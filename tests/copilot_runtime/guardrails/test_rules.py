"""Which rules apply to a turn, and which message they are checked on."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from copilot_runtime.guardrails.rules import (
    rules_for_turn_cached,
    stored_rules_in_scope,
    subject_from_request,
)
from copilot_runtime.models import GuardrailRule
from tests.copilot_runtime.guardrails.helpers import cloud_lists, turn_request, user_text


def make_rule(name: str, **fields: object) -> GuardrailRule:
    defaults: dict[str, object] = {"kind": "deny", "match": "topic", "text": name}
    return GuardrailRule.objects.create(name=name, **{**defaults, **fields})


@pytest.mark.django_db
def test_rules_in_scope_are_enabled_for_all_agents_or_this_one_by_priority() -> None:
    make_rule("everyone", priority=1)
    make_rule("mine", agent_name="support", priority=5)
    make_rule("theirs", agent_name="sales", priority=9)
    make_rule("switched off", enabled=False, priority=10)
    make_rule("urgent", priority=7)

    names = [rule.name for rule in stored_rules_in_scope(agent_name="support")]

    assert names == ["urgent", "mine", "everyone"]
    assert [rule.name for rule in stored_rules_in_scope(agent_name="default")] == [
        "urgent",
        "everyone",
    ]


@pytest.mark.django_db
def test_stored_rules_keep_their_id_and_fields() -> None:
    stored = make_rule("SSNs", kind="deny", match="pattern", text=r"\d{3}-\d{2}-\d{4}")

    (rule,) = stored_rules_in_scope(agent_name="default")

    assert (rule.rule_id, rule.kind, rule.match, rule.text, rule.name) == (
        stored.pk,
        "deny",
        "pattern",
        r"\d{3}-\d{2}-\d{4}",
        "SSNs",
    )
    assert rule.source == "stored"


@pytest.mark.django_db
# Transactional: the rule is written from asgiref's thread, outside the test's transaction.
@pytest.mark.django_db(transaction=True)
async def test_the_requests_own_lists_are_merged_after_the_stored_rules() -> None:
    await sync_to_async(make_rule)("politics")
    request = turn_request(
        user_text("u1", "hi"),
        cloud=cloud_lists(allow=["cooking", " ", "baking"], deny=["sports"]),
    )

    rules = await rules_for_turn_cached(request=request)

    assert [(r.kind, r.text, r.source) for r in rules] == [
        ("deny", "politics", "stored"),
        ("deny", "sports", "request"),
        ("allow", "cooking", "request"),
        ("allow", "baking", "request"),
    ]
    assert all(rule.is_topic for rule in rules)


def test_the_subject_is_the_last_user_text_with_the_earlier_conversation() -> None:
    request = turn_request(
        user_text("s1", "You are helpful.", role="system"),
        user_text("u1", "Hi"),
        user_text("a1", "Hello!", role="assistant"),
        user_text("u2", "Tell me about elections"),
    )

    subject = subject_from_request(request)

    assert subject is not None
    assert (subject.text, subject.message_id, subject.agent_name) == (
        "Tell me about elections",
        "u2",
        "default",
    )
    assert subject.history == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
    ]


def test_a_follow_up_that_does_not_end_with_a_user_message_is_not_checked() -> None:
    request = turn_request(user_text("u1", "Hi"), user_text("a1", "Hello!", role="assistant"))
    result_follow_up = turn_request(
        user_text("u1", "Say hello"),
        {
            "id": "r1",
            "createdAt": "2025-01-01T00:00:00.000Z",
            "resultMessage": {"actionExecutionId": "c1", "actionName": "sayHello", "result": "ok"},
        },
    )

    assert subject_from_request(request) is None
    assert subject_from_request(result_follow_up) is None
    assert subject_from_request(turn_request()) is None
