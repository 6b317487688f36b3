"""Models of the runtime's own configuration: API tokens and guardrail rules."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models

TOKEN_PREFIX = "crt_"


def token_hash(raw_token: str) -> str:
    """The stored form of a token: its SHA-256. Tokens are long and random, so no salt is needed."""
    return hashlib.sha256(raw_token.encode()).hexdigest()


def token_generate() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class ApiToken(models.Model):
    """A bearer token for the runtime. Only its hash is stored; the raw token is shown once."""

    name = models.CharField(max_length=255)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="copilot_api_tokens"
    )
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    # The first characters, so an admin can tell tokens apart without the secret.
    token_prefix = models.CharField(max_length=16, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.token_prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class GuardrailRuleKind(models.TextChoices):
    ALLOW = "allow", "Allow"
    DENY = "deny", "Deny"


class GuardrailMatch(models.TextChoices):
    TOPIC = "topic", "Topic"
    PATTERN = "pattern", "Pattern (regular expression)"


class GuardrailRule(models.Model):
    """An input validation rule evaluated on the last user message."""

    name = models.CharField(max_length=255)
    kind = models.CharField(max_length=8, choices=GuardrailRuleKind)
    match = models.CharField(max_length=8, choices=GuardrailMatch, default=GuardrailMatch.TOPIC)
    text = models.TextField(help_text="The topic, or the regular expression for a pattern rule.")
    # Blank means every agent.
    agent_name = models.CharField(max_length=255, blank=True, default="")
    enabled = models.BooleanField(default=True)
    priority = models.IntegerField(default=0, help_text="Higher priorities are evaluated first.")
    # The rule's name and text are for the admin: the end user is told this instead.
    denial_text = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="What the end user is told when this rule refuses a message (blank: "
        "\"This message can't be sent.\"). The rule's name stays in the run's log and here.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-priority", "name"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.name}"

    @property
    def scope(self) -> str:
        return self.agent_name or "all agents"


class PriceSource(models.TextChoices):
    ADMIN = "admin", "Set in the admin"
    TABLE = "genai-prices", "Seeded from genai-prices"


class ModelPrice(models.Model):
    """What a model's tokens cost, in USD per million; used for the cost of each model call.

    A row also prices the longer model names that start with its name (a provider's dated
    snapshot such as ``gpt-4o-mini-2024-07-18``), unless that name has a row of its own.
    """

    model = models.CharField(max_length=255, unique=True)
    input_per_million = models.DecimalField(
        max_digits=12, decimal_places=6, help_text="USD per million input tokens."
    )
    cached_input_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="USD per million cached input tokens; blank: the input price.",
    )
    cache_write_input_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="USD per million input tokens written to the prompt cache (Anthropic's "
        "cache creation); blank: the input price.",
    )
    output_per_million = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        help_text="USD per million output tokens (reasoning tokens included).",
    )
    # Seeded rows follow the price table (manage.py seed_model_prices); a row changed in the
    # admin becomes the project's own and is never overwritten.
    source = models.CharField(max_length=32, choices=PriceSource, default=PriceSource.ADMIN)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["model"]
        verbose_name = "model price"

    def __str__(self) -> str:
        return self.model


class GuardrailVerdict(models.TextChoices):
    ALLOWED = "allowed", "Allowed"
    DENIED = "denied", "Denied"
    ERROR = "error", "Evaluator error"


class GuardrailEvaluation(models.Model):
    """One rule checked on one message: who checked it, the verdict, why, and how long it took.

    ``rule`` is empty for the entries of a request's own ``cloud.guardrails`` lists (and for a
    rule deleted since); the ``rule_*`` columns keep what was checked either way.
    """

    rule = models.ForeignKey(
        GuardrailRule,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="evaluations",
    )
    run = models.ForeignKey(
        "conversations.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="guardrail_evaluations",
    )
    source = models.CharField(max_length=8, help_text="stored (admin) or request (its lists)")
    rule_kind = models.CharField(max_length=8, choices=GuardrailRuleKind)
    rule_match = models.CharField(max_length=8, choices=GuardrailMatch)
    rule_text = models.TextField()
    agent_name = models.CharField(max_length=255, blank=True, default="")
    evaluator = models.CharField(max_length=8, help_text="local, model or cloud")
    mode = models.CharField(max_length=8, help_text="blocking or parallel")
    verdict = models.CharField(max_length=8, choices=GuardrailVerdict)
    # Whether the message matched the rule; empty when the evaluator could not say.
    matched = models.BooleanField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    latency_ms = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["rule", "-created_at"], name="guardrail_eval_rule_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.verdict}: {self.rule_text[:60]}"
