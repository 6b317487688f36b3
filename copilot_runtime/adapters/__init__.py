"""LLM service adapters: the OpenAI-compatible one and the offline demo model."""

from __future__ import annotations

from functools import cache

from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.conf import runtime_settings


def adapter_from_settings() -> ModelAdapter:
    """The configured adapter: OpenAI when a key is set (or forced), else the demo model."""
    conf = runtime_settings()
    return _build_adapter(
        conf["MODEL_ADAPTER"],
        conf["OPENAI_API_KEY"],
        conf["OPENAI_BASE_URL"],
        conf["OPENAI_MODEL"],
        float(conf["OPENAI_TIMEOUT_SECONDS"]),
        int(conf["OPENAI_MAX_RETRIES"]),
    )


@cache
def _build_adapter(
    kind: str, api_key: str, base_url: str, model: str, timeout: float, max_retries: int
) -> ModelAdapter:
    # Cached per configuration so the HTTP client's connection pool is reused across turns.
    if kind == "openai" or (kind == "auto" and api_key):
        from copilot_runtime.adapters.openai_adapter import OpenAIAdapter

        return OpenAIAdapter(
            api_key=api_key or "not-set",
            base_url=base_url or None,
            model=model,
            timeout=timeout,
            max_retries=max_retries,
        )
    from copilot_runtime.adapters.demo import DemoAdapter

    return DemoAdapter()
