"""Copilot Cloud's guardrails endpoint as an evaluator of topic rules.

``POST {base}/guardrails/validate`` with the public API key in ``X-CopilotCloud-Public-API-Key``
and ``{"input", "validTopics", "invalidTopics", "messages"}``; it answers
``{"status": "allowed" | "denied", "reason"?}``. It does not say which topic decided, so a
denial is recorded against every topic rule it was given (a veto).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from copilot_runtime.guardrails.rules import RuleSpec, Subject
from copilot_runtime.guardrails.verdicts import Finding

CLOUD = "cloud"
API_KEY_HEADER = "X-CopilotCloud-Public-API-Key"
VALIDATE_PATH = "/guardrails/validate"


def validate_body(subject: Subject, rules: Sequence[RuleSpec]) -> dict[str, Any]:
    return {
        "input": subject.text,
        "validTopics": [rule.text for rule in rules if rule.is_allow],
        "invalidTopics": [rule.text for rule in rules if rule.is_deny],
        "messages": subject.history,
    }


class CloudEvaluator:
    name = CLOUD

    def __init__(self, *, base_url: str, public_api_key: str, timeout: float) -> None:
        self._url = base_url.rstrip("/") + VALIDATE_PATH
        self._key = public_api_key
        self._timeout = timeout

    async def evaluate(self, subject: Subject, rules: Sequence[RuleSpec]) -> Finding:
        # Imported on use: only a project with Copilot Cloud guardrails needs httpx loaded.
        import httpx

        started = time.perf_counter()

        def failed(error: str) -> Finding:
            latency = int((time.perf_counter() - started) * 1000)
            return Finding.failed(CLOUD, rules, error, latency_ms=latency)

        if not self._key:
            return failed(
                "no Copilot Cloud public API key: set COPILOT_CLOUD_PUBLIC_API_KEY or send the "
                f"{API_KEY_HEADER} header"
            )
        try:
            async with asyncio.timeout(self._timeout):
                answer = await self._post(validate_body(subject, rules))
        except TimeoutError:
            return failed(f"Copilot Cloud did not answer within {self._timeout:g} s")
        except httpx.HTTPError as error:
            return failed(f"Copilot Cloud could not be reached ({type(error).__name__})")
        if isinstance(answer, str):
            return failed(answer)
        status = answer.get("status")
        reason = answer.get("reason")
        reason = reason.strip() if isinstance(reason, str) else ""
        latency = int((time.perf_counter() - started) * 1000)
        if status == "allowed":
            return Finding(
                evaluator=CLOUD,
                rules=list(rules),
                matched=[False if rule.is_deny else None for rule in rules],
                vouched=any(rule.is_allow for rule in rules),
                reason=reason,
                latency_ms=latency,
            )
        if status == "denied":
            return Finding(
                evaluator=CLOUD, rules=list(rules), vetoed=True, reason=reason, latency_ms=latency
            )
        return failed(f"Copilot Cloud answered an unknown status {status!r}")

    async def _post(self, body: dict[str, Any]) -> dict[str, Any] | str:
        """The endpoint's JSON answer, or why there is none."""
        import httpx

        async with httpx.AsyncClient(timeout=self._timeout) as client:
            response = await client.post(
                self._url,
                json=body,
                headers={API_KEY_HEADER: self._key, "Content-Type": "application/json"},
            )
        if response.status_code >= 400:
            return f"Copilot Cloud answered HTTP {response.status_code}"
        try:
            answer = response.json()
        except ValueError:
            return "Copilot Cloud answered something that is not JSON"
        if not isinstance(answer, dict):
            return "Copilot Cloud answered something that is not a JSON object"
        return answer
