"""The adapter kinds: what each needs in its setting, and how it is built.

``adapter_spec_check`` validates a setting without building anything (system checks and the
refusal of a turn use it); ``adapter_build`` builds the adapter, importing its module only
then, so a kind's optional dependency is needed only where that kind is configured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.adapters.errors import AdapterSettingError

OPENAI = "openai"
AZURE = "azure"
ANTHROPIC = "anthropic"
LANGCHAIN = "langchain"
DEMO = "demo"
NONE = "none"

# Options every kind takes besides its own: the default model and the HTTP behaviour.
_COMMON = frozenset({"kind", "model", "timeout_seconds", "max_retries"})
_OPTIONS: dict[str, frozenset[str]] = {
    OPENAI: _COMMON | {"api_key", "base_url", "system_role"},
    AZURE: _COMMON | {"api_key", "endpoint", "deployment", "api_version", "system_role"},
    ANTHROPIC: _COMMON | {"api_key", "base_url", "max_tokens", "version", "thinking_budget"},
    LANGCHAIN: _COMMON | {"factory", "options"},
    DEMO: frozenset({"kind"}),
    NONE: frozenset({"kind"}),
}
# Options a kind cannot do without.
_REQUIRED: dict[str, tuple[str, ...]] = {
    AZURE: ("deployment",),
    LANGCHAIN: ("factory",),
}
ADAPTER_KINDS = tuple(_OPTIONS)


def adapter_spec_check(spec: Any, *, where: str = "ADAPTER") -> dict[str, Any]:
    """The setting, checked: a dict with a known ``kind``, only that kind's options, and the
    ones it needs. Raises ``AdapterSettingError`` naming ``where``."""
    if not isinstance(spec, dict):
        raise AdapterSettingError(f"{where} must be a dict with a 'kind', not {spec!r}.")
    kind = spec.get("kind")
    if kind not in _OPTIONS:
        known = ", ".join(ADAPTER_KINDS)
        raise AdapterSettingError(f"{where}: unknown adapter kind {kind!r} (one of {known}).")
    unknown = sorted(set(spec) - _OPTIONS[kind])
    if unknown:
        allowed = ", ".join(sorted(_OPTIONS[kind] - {"kind"})) or "none"
        raise AdapterSettingError(
            f"{where}: the {kind} adapter has no option {', '.join(map(repr, unknown))} "
            f"(its options: {allowed})."
        )
    missing = [name for name in _REQUIRED.get(kind, ()) if not spec.get(name)]
    if missing:
        raise AdapterSettingError(
            f"{where}: the {kind} adapter needs {', '.join(map(repr, missing))}."
        )
    return spec


def _timeout(spec: dict[str, Any]) -> float:
    return float(spec.get("timeout_seconds") or 60.0)


def _retries(spec: dict[str, Any]) -> int:
    value = spec.get("max_retries")
    return 2 if value is None else int(value)


def _openai(spec: dict[str, Any]) -> ModelAdapter:
    from copilot_runtime.adapters.openai_adapter import OpenAIAdapter

    return OpenAIAdapter(
        api_key=str(spec.get("api_key") or "not-set"),
        base_url=str(spec.get("base_url") or "") or None,
        model=str(spec.get("model") or "gpt-4o-mini"),
        timeout=_timeout(spec),
        max_retries=_retries(spec),
        system_role=str(spec.get("system_role") or "auto"),
    )


def _azure(spec: dict[str, Any]) -> ModelAdapter:
    from copilot_runtime.adapters.azure import azure_openai_adapter

    return azure_openai_adapter(
        api_key=str(spec.get("api_key") or ""),
        endpoint=str(spec.get("endpoint") or ""),
        deployment=str(spec["deployment"]),
        api_version=str(spec.get("api_version") or ""),
        model=str(spec.get("model") or spec["deployment"]),
        timeout=_timeout(spec),
        max_retries=_retries(spec),
        system_role=str(spec.get("system_role") or "auto"),
    )


def _anthropic(spec: dict[str, Any]) -> ModelAdapter:
    from copilot_runtime.adapters.anthropic_adapter import AnthropicAdapter

    return AnthropicAdapter(
        api_key=str(spec.get("api_key") or ""),
        base_url=str(spec.get("base_url") or "") or None,
        model=str(spec.get("model") or "claude-sonnet-4-5"),
        timeout=_timeout(spec),
        max_retries=_retries(spec),
        max_tokens=int(spec.get("max_tokens") or 4096),
        version=str(spec.get("version") or "2023-06-01"),
        thinking_budget=int(spec.get("thinking_budget") or 0),
    )


def _langchain(spec: dict[str, Any]) -> ModelAdapter:
    from copilot_runtime.adapters.langchain_adapter import LangChainAdapter

    return LangChainAdapter(
        factory=str(spec["factory"]),
        options=dict(spec.get("options") or {}),
        model=str(spec.get("model") or ""),
    )


def _demo(spec: dict[str, Any]) -> ModelAdapter:
    from copilot_runtime.adapters.demo import DemoAdapter

    return DemoAdapter()


def _none(spec: dict[str, Any]) -> ModelAdapter:
    from copilot_runtime.adapters.none import NoModelAdapter

    return NoModelAdapter()


_BUILDERS: dict[str, Callable[[dict[str, Any]], ModelAdapter]] = {
    OPENAI: _openai,
    AZURE: _azure,
    ANTHROPIC: _anthropic,
    LANGCHAIN: _langchain,
    DEMO: _demo,
    NONE: _none,
}


def adapter_build(spec: dict[str, Any]) -> ModelAdapter:
    checked = adapter_spec_check(spec)
    return _BUILDERS[checked["kind"]](checked)
