"""The local evaluator: regular expressions for pattern rules, keywords for topic rules.

Both ignore case. A topic rule's text is one or more keywords or phrases separated by commas,
semicolons or new lines ("cooking, recipes, baking"); it matches when any of them appears as
whole words (a trailing "s" or "es" is allowed, so "recipe" also matches "recipes").
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from functools import lru_cache

from copilot_runtime.guardrails.rules import RuleSpec, Subject
from copilot_runtime.guardrails.verdicts import Finding, deny_reason

LOCAL = "local"

_SEPARATORS = re.compile(r"[,;\n]+")


def topic_keywords(text: str) -> list[str]:
    return [keyword.strip() for keyword in _SEPARATORS.split(text) if keyword.strip()]


@lru_cache(maxsize=512)
def _topic_regex(text: str) -> re.Pattern[str]:
    alternatives = [
        r"\s+".join(re.escape(word) for word in keyword.split()) for keyword in topic_keywords(text)
    ]
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?:e?s)?(?!\w)", re.IGNORECASE)


@lru_cache(maxsize=512)
def pattern_regex(text: str) -> re.Pattern[str]:
    """The compiled pattern of a rule; raises ``re.error`` for an invalid one."""
    return re.compile(text, re.IGNORECASE)


def rule_matches(rule: RuleSpec, text: str) -> bool:
    if rule.is_topic:
        return bool(topic_keywords(rule.text)) and _topic_regex(rule.text).search(text) is not None
    return pattern_regex(rule.text).search(text) is not None


def _matched_reason(rule: RuleSpec) -> str:
    if rule.is_deny:
        return deny_reason(rule)
    if rule.is_topic:
        return f'The message is about an allowed topic: "{rule.text}".'
    return f'The message matches an allowed pattern (rule "{rule.name}").'


class LocalEvaluator:
    name = LOCAL

    async def evaluate(self, subject: Subject, rules: Sequence[RuleSpec]) -> Finding:
        started = time.perf_counter()
        matched: list[bool | None] = []
        reasons: list[str] = []
        for rule in rules:
            try:
                hit = rule_matches(rule, subject.text)
            except re.error as error:
                return Finding.failed(
                    LOCAL, rules, f'rule "{rule.name}" has an invalid pattern: {error}'
                )
            matched.append(hit)
            reasons.append(_matched_reason(rule) if hit else "")
        return Finding(
            evaluator=LOCAL,
            rules=list(rules),
            matched=matched,
            reasons=reasons,
            latency_ms=int((time.perf_counter() - started) * 1000),
        )
