"""Small builders shared by the guardrails unit tests."""

from __future__ import annotations

from typing import Any

from copilot_runtime.events.request import TurnRequest
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.guardrails.rules import ALLOW, DENY, PATTERN, TOPIC, RuleSpec, Subject


def topic(kind: str, text: str, *, priority: int = 0, rule_id: int | None = 1) -> RuleSpec:
    return RuleSpec(
        kind=kind, match=TOPIC, text=text, name=text, priority=priority, rule_id=rule_id
    )


def pattern(
    kind: str, text: str, *, name: str = "", priority: int = 0, rule_id: int | None = 1
) -> RuleSpec:
    return RuleSpec(
        kind=kind, match=PATTERN, text=text, name=name or text, priority=priority, rule_id=rule_id
    )


def allow_topic(text: str, **options: Any) -> RuleSpec:
    return topic(ALLOW, text, **options)


def deny_topic(text: str, **options: Any) -> RuleSpec:
    return topic(DENY, text, **options)


def subject(text: str) -> Subject:
    return Subject(text=text, message_id="u1", agent_name="default")


def user_text(message_id: str, content: str, role: str = "user") -> dict[str, Any]:
    return {
        "id": message_id,
        "createdAt": "2025-01-01T00:00:00.000Z",
        "textMessage": {"content": content, "role": role},
    }


def turn_request(
    *messages: dict[str, Any],
    thread_id: str = "thread-guard",
    cloud: dict[str, Any] | None = None,
    agent_name: str | None = None,
) -> TurnRequest:
    data: dict[str, Any] = {
        "threadId": thread_id,
        "frontend": {"actions": []},
        "messages": list(messages),
        "metadata": {"requestType": "Chat"},
    }
    if cloud is not None:
        data["cloud"] = cloud
    if agent_name is not None:
        data["agentSession"] = {"agentName": agent_name}
    return parse_generate_input(data, {})


def cloud_lists(*, allow: list[str] | None = None, deny: list[str] | None = None) -> dict[str, Any]:
    return {
        "guardrails": {"inputValidationRules": {"allowList": allow or [], "denyList": deny or []}}
    }
