"""The ``GUARDRAILS_*`` settings of one turn (documented in ``copilot_runtime/conf.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from copilot_runtime.conf import runtime_settings
from copilot_runtime.errors import CopilotKitError, ErrorCode

BLOCKING = "blocking"
PARALLEL = "parallel"
FAIL_CLOSED = "closed"
FAIL_OPEN = "open"

LOCAL = "local"
MODEL = "model"
CLOUD = "cloud"
AUTO = "auto"

_MODES = (BLOCKING, PARALLEL)
_FAIL_MODES = (FAIL_CLOSED, FAIL_OPEN)
_EVALUATORS = (LOCAL, MODEL, CLOUD, AUTO)


@dataclass(frozen=True, slots=True)
class GuardrailsConfig:
    enabled: bool
    mode: str
    fail: str
    evaluator: str
    timeout_seconds: float
    model: str
    cloud_public_api_key: str
    cloud_base_url: str

    @property
    def fails_closed(self) -> bool:
        return self.fail == FAIL_CLOSED


def _choice(key: str, value: object, allowed: tuple[str, ...]) -> str:
    text = str(value).strip().lower()
    if text not in allowed:
        raise CopilotKitError(
            f"COPILOT_RUNTIME[{key!r}] is {value!r}; expected one of {', '.join(allowed)}.",
            code=ErrorCode.CONFIGURATION_ERROR,
        )
    return text


def guardrails_config() -> GuardrailsConfig:
    conf = runtime_settings()
    return GuardrailsConfig(
        enabled=bool(conf["GUARDRAILS_ENABLED"]),
        mode=_choice("GUARDRAILS_MODE", conf["GUARDRAILS_MODE"], _MODES),
        fail=_choice("GUARDRAILS_FAIL", conf["GUARDRAILS_FAIL"], _FAIL_MODES),
        evaluator=_choice("GUARDRAILS_EVALUATOR", conf["GUARDRAILS_EVALUATOR"], _EVALUATORS),
        timeout_seconds=float(conf["GUARDRAILS_TIMEOUT_SECONDS"]),
        model=str(conf["GUARDRAILS_MODEL"] or ""),
        cloud_public_api_key=str(conf["COPILOT_CLOUD_PUBLIC_API_KEY"] or ""),
        cloud_base_url=str(conf["COPILOT_CLOUD_BASE_URL"] or "").rstrip("/"),
    )
