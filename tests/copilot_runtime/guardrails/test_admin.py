"""The admin: rules edited with validation, their recent evaluations and trips beside them."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from conversations.models import Run, Thread
from copilot_runtime.models import GuardrailEvaluation, GuardrailRule

pytestmark = pytest.mark.django_db


def make_rule(**fields: Any) -> GuardrailRule:
    defaults: dict[str, Any] = {"name": "No politics", "kind": "deny", "text": "politics"}
    return GuardrailRule.objects.create(**{**defaults, **fields})


def evaluate(rule: GuardrailRule | None, verdict: str, reason: str, **fields: Any) -> Any:
    defaults: dict[str, Any] = {
        "source": "stored" if rule else "request",
        "rule_kind": "deny",
        "rule_match": "topic",
        "rule_text": rule.text if rule else "sports",
        "evaluator": "local",
        "mode": "blocking",
        "matched": verdict == "denied",
        "latency_ms": 3,
    }
    return GuardrailEvaluation.objects.create(
        rule=rule, verdict=verdict, reason=reason, **{**defaults, **fields}
    )


def test_a_rules_page_shows_its_recent_evaluations_and_trip_count(admin_client: Any) -> None:
    rule = make_rule()
    thread = Thread.objects.create(thread_id="t-admin")
    run = Run.objects.create(id="run-admin-1", thread=thread)
    evaluate(rule, "denied", "The message is about a denied topic: politics.", run=run)
    evaluate(rule, "denied", "Again politics.")
    evaluate(rule, "allowed", "")
    evaluate(make_rule(name="Other"), "denied", "Not this rule's trip.")

    page = admin_client.get(reverse("admin:copilot_runtime_guardrailrule_change", args=[rule.pk]))

    assert page.status_code == 200
    html = page.content.decode()
    assert "Recent evaluations" in html
    assert "The message is about a denied topic: politics." in html
    assert "Again politics." in html
    assert "Not this rule&#x27;s trip." not in html and "Not this rule's trip." not in html
    assert reverse("admin:conversations_run_change", args=["run-admin-1"]) in html
    assert '<div class="readonly">2</div>' in html  # trips
    assert '<div class="readonly">3</div>' in html  # evaluations
    assert f"?rule__id__exact={rule.pk}" in html


def test_the_rule_list_shows_trips_and_evaluations(admin_client: Any) -> None:
    rule = make_rule()
    evaluate(rule, "denied", "x")
    evaluate(rule, "error", "the model call failed")

    page = admin_client.get(reverse("admin:copilot_runtime_guardrailrule_changelist"))

    assert page.status_code == 200
    listed = page.context["cl"].result_list
    (shown,) = listed
    assert (shown.trip_count, shown.evaluation_count) == (1, 2)
    assert "Trips" in page.content.decode()


def test_an_invalid_pattern_is_refused_and_a_valid_rule_is_saved(admin_client: Any) -> None:
    url = reverse("admin:copilot_runtime_guardrailrule_add")
    form = {
        "name": "SSNs",
        "kind": "deny",
        "match": "pattern",
        "text": "([0-9",
        "agent_name": "",
        "enabled": "on",
        "priority": "5",
    }

    refused = admin_client.post(url, form)
    saved = admin_client.post(url, {**form, "text": r"\b\d{3}-\d{2}-\d{4}\b"})

    assert refused.status_code == 200
    assert "Not a valid regular expression" in refused.content.decode()
    assert saved.status_code == 302
    rule = GuardrailRule.objects.get()
    assert (rule.name, rule.match, rule.priority, rule.enabled) == ("SSNs", "pattern", 5, True)


PATTERN_RULE = {
    "name": "A pattern",
    "kind": "deny",
    "match": "pattern",
    "agent_name": "",
    "enabled": "on",
    "priority": "0",
}


def add_rule_form(admin_client: Any, **fields: str) -> Any:
    return admin_client.post(
        reverse("admin:copilot_runtime_guardrailrule_add"), {**PATTERN_RULE, **fields}
    )


@pytest.mark.parametrize(
    ("text", "feature"),
    [
        (r"password(?=\d)", "a look-ahead"),
        (r"password(?!\d)", "a look-ahead"),
        (r"(?<!un)safe", "a look-behind"),
        (r"(?<=\$)\d+", "a look-behind"),
        (r"(\w+) \1", "a backreference"),
        (r"(?P<word>\w+) (?P=word)", "a backreference"),
        (r"\d++", "a possessive quantifier"),
        (r"(?>ab|a)c", "an atomic group"),
    ],
)
def test_a_pattern_rules_cannot_run_is_refused_with_the_reason(
    admin_client: Any, text: str, feature: str
) -> None:
    page = add_rule_form(admin_client, text=text)

    assert page.status_code == 200
    assert page.context["adminform"].form.errors["text"] == [
        f"This pattern uses {feature}, which rules cannot use: rules run in linear time "
        "(RE2 syntax)."
    ]
    assert not GuardrailRule.objects.exists()


def test_a_pattern_longer_than_the_limit_is_refused(admin_client: Any) -> None:
    page = add_rule_form(admin_client, text="a" * 501)

    assert page.context["adminform"].form.errors["text"] == [
        "This pattern is 501 characters long; a rule's pattern may have at most 500."
    ]


@pytest.mark.parametrize(
    "text",
    [
        r"\b\d{3}-\d{2}-\d{4}\b",
        r"ignore (all )?previous instructions",
        r"(?P<area>\d{3})-\d{4}",
        r"^(a+)+$",  # catastrophic for a backtracking engine, linear in RE2
        "a" * 500,
    ],
)
def test_an_ordinary_pattern_is_saved_as_written(admin_client: Any, text: str) -> None:
    page = add_rule_form(admin_client, text=text)

    assert page.status_code == 302
    assert GuardrailRule.objects.get().text == text


def test_a_topic_is_not_read_as_a_pattern(admin_client: Any) -> None:
    page = add_rule_form(admin_client, match="topic", text="(?=x), c++")

    assert page.status_code == 302


def test_the_evaluation_list_is_read_only_and_filters_by_rule(admin_client: Any) -> None:
    rule = make_rule()
    evaluate(rule, "denied", "politics")
    evaluate(None, "allowed", "")
    changelist = reverse("admin:copilot_runtime_guardrailevaluation_changelist")

    everything = admin_client.get(changelist)
    one_rule = admin_client.get(f"{changelist}?rule__id__exact={rule.pk}")
    add = admin_client.get(reverse("admin:copilot_runtime_guardrailevaluation_add"))

    assert everything.status_code == 200
    assert len(everything.context["cl"].result_list) == 2
    assert "sports (from the request)" in everything.content.decode()
    assert [e.rule_id for e in one_rule.context["cl"].result_list] == [rule.pk]
    assert add.status_code == 403
