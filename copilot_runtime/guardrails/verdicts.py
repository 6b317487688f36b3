"""What evaluators answer (``Finding``) and how their answers become one ``Decision``.

Every evaluator reports, for each rule it was given, whether the message matched it (``None``
when it cannot say). A few evaluators judge a group of rules as a whole: Copilot Cloud only
answers allowed or denied (a *veto*, or a *vouch* that the allow list is satisfied), and the
model classifier may do the same when it names no topic. The decision then follows the same
laws whoever evaluated: deny wins over allow, and with any allow rule in scope the message must
match one. An evaluator that failed either refuses the message (fail closed) or is left out
(fail open); its rules are recorded with the verdict ``error`` and the failure as the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from copilot_runtime.adapters.base import UsageChunk
from copilot_runtime.guardrails.rules import RuleSpec

ALLOWED = "allowed"
DENIED = "denied"
ERROR = "error"

DEFAULT_VETO_REASON = "Topic not allowed"
# What the end user is told when a rule of the admin's refuses a message and the rule sets no
# text of its own: the rule's name and text are the admin's, not the user's, to read.
DEFAULT_DENIAL_TEXT = "This message can't be sent."


@dataclass(slots=True)
class ModelUsage:
    """A model call an evaluator made, to be counted in the run's usage."""

    model: str
    usage: UsageChunk
    finish_reason: str | None = None


@dataclass(slots=True)
class Finding:
    """One evaluator's answer about the rules it was given (lists aligned with ``rules``)."""

    evaluator: str
    rules: list[RuleSpec]
    matched: list[bool | None] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    vetoed: bool = False  # denied as a whole, without saying which rule decided
    vouched: bool = False  # the message is on an allowed topic, without saying which one
    reason: str = ""  # the evaluator's own words about its verdict
    error: str = ""  # set when the evaluator failed (error, timeout, unreadable answer)
    latency_ms: int = 0
    model_usage: ModelUsage | None = None

    def __post_init__(self) -> None:
        if not self.matched:
            self.matched = [None] * len(self.rules)
        if not self.reasons:
            self.reasons = [""] * len(self.rules)

    @classmethod
    def failed(
        cls,
        evaluator: str,
        rules: Sequence[RuleSpec],
        error: str,
        *,
        latency_ms: int = 0,
        model_usage: ModelUsage | None = None,
    ) -> Finding:
        return cls(
            evaluator=evaluator,
            rules=list(rules),
            error=error,
            latency_ms=latency_ms,
            model_usage=model_usage,
        )

    @property
    def has_allow_rules(self) -> bool:
        return any(rule.is_allow for rule in self.rules)


@dataclass(slots=True)
class EvaluationRecord:
    """One rule's evaluation, as stored (``GuardrailEvaluation``)."""

    rule: RuleSpec
    evaluator: str
    verdict: str
    matched: bool | None
    reason: str
    latency_ms: int


@dataclass(slots=True)
class Decision:
    denied: bool
    reason: str  # for the run's log and the admin: may name the rule
    records: list[EvaluationRecord]
    model_usage: list[ModelUsage] = field(default_factory=list)
    user_text: str = ""  # for the end user: names no rule of the admin's


def deny_reason(rule: RuleSpec) -> str:
    if rule.is_topic:
        return f'The message is about a denied topic: "{rule.text}".'
    return f'The message matches a denied pattern (rule "{rule.name}").'


def allow_list_reason(allow_rules: Sequence[RuleSpec]) -> str:
    names = ", ".join(rule.text if rule.is_topic else f'"{rule.name}"' for rule in allow_rules)
    return f"The message is outside the allowed topics: {names}."


def error_reason(finding: Finding) -> str:
    return f"Guardrails could not check this message ({finding.evaluator}: {finding.error})"


def _told(rules: Sequence[RuleSpec], reason: str) -> str:
    """What the end user is told of a refusal decided by ``rules``: the first stored rule's
    own text (or the default); a refusal by the request's own rules only keeps its reason
    (the client sent those topics)."""
    stored = [rule for rule in rules if rule.rule_id is not None]
    if not stored:
        return reason
    return next((rule.denial_text for rule in stored if rule.denial_text), DEFAULT_DENIAL_TEXT)


def _deny_hits(findings: Sequence[Finding]) -> list[tuple[RuleSpec, str]]:
    hits = [
        (rule, finding.reasons[index] or finding.reason or deny_reason(rule))
        for finding in findings
        if not finding.error
        for index, rule in enumerate(finding.rules)
        if rule.is_deny and finding.matched[index] is True
    ]
    # Stable: at equal priority, stored rules (listed first) come before the request's own.
    return sorted(hits, key=lambda hit: -hit[0].priority)


def _allow_list_satisfied(findings: Sequence[Finding], *, fails_closed: bool) -> bool:
    for finding in findings:
        if finding.error:
            if not fails_closed and finding.has_allow_rules:
                return True  # fail open: what could not be checked does not refuse
            continue
        if finding.vouched and finding.has_allow_rules:
            return True
        if any(
            rule.is_allow and finding.matched[index] is True
            for index, rule in enumerate(finding.rules)
        ):
            return True
    return False


def _allow_list_refusal(findings: Sequence[Finding], allow_rules: Sequence[RuleSpec]) -> str:
    """The allow list's refusal, in the words of an evaluator that judged it if there is one."""
    for finding in findings:
        if not finding.error and finding.has_allow_rules and finding.reason:
            return finding.reason
    return allow_list_reason(allow_rules)


def decide(findings: Sequence[Finding], *, fails_closed: bool) -> Decision:
    """One decision from every evaluator's finding, with one record per rule evaluated."""
    deny_hits = _deny_hits(findings)
    vetoes = [finding for finding in findings if finding.vetoed and not finding.error]
    failures = [finding for finding in findings if finding.error]
    allow_rules = [rule for finding in findings for rule in finding.rules if rule.is_allow]
    allow_list_refused = bool(allow_rules) and not _allow_list_satisfied(
        findings, fails_closed=fails_closed
    )

    if deny_hits:
        denied, reason = True, deny_hits[0][1]
        told = _told([deny_hits[0][0]], reason)
    elif vetoes:
        denied, reason = True, vetoes[0].reason or DEFAULT_VETO_REASON
        told = _told(vetoes[0].rules, reason)
    elif failures and fails_closed:
        # How an evaluator failed is the operator's business.
        denied, reason, told = True, error_reason(failures[0]), DEFAULT_DENIAL_TEXT
    elif allow_list_refused:
        denied, reason = True, _allow_list_refusal(findings, allow_rules)
        told = _told(allow_rules, reason)
    else:
        denied, reason, told = False, "", ""
    # The allow list is the reason only when nothing earlier decided.
    allow_list_decided = denied and not deny_hits and not vetoes and not (failures and fails_closed)

    records = [
        _record(finding, index, allow_list_decided=allow_list_decided)
        for finding in findings
        for index in range(len(finding.rules))
    ]
    usage = [finding.model_usage for finding in findings if finding.model_usage is not None]
    return Decision(
        denied=denied, reason=reason, records=records, model_usage=usage, user_text=told
    )


def _record(finding: Finding, index: int, *, allow_list_decided: bool) -> EvaluationRecord:
    rule = finding.rules[index]
    matched = finding.matched[index]
    if finding.error:
        verdict, reason = ERROR, finding.error
    elif finding.vetoed:
        verdict, reason = DENIED, finding.reason or DEFAULT_VETO_REASON
    elif rule.is_deny and matched is True:
        verdict, reason = DENIED, finding.reasons[index] or finding.reason or deny_reason(rule)
    elif rule.is_allow and allow_list_decided:
        verdict = DENIED
        reason = finding.reasons[index] or finding.reason or "Did not match this allowed topic."
    else:
        verdict, reason = ALLOWED, finding.reasons[index]
    return EvaluationRecord(
        rule=rule,
        evaluator=finding.evaluator,
        verdict=verdict,
        matched=matched,
        reason=reason,
        latency_ms=finding.latency_ms,
    )
