"""LLM service adapters: the OpenAI-compatible one and the offline demo model."""

from __future__ import annotations

import asyncio
import weakref

from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.conf import runtime_settings

# Adapters hold an HTTP connection pool, which belongs to the event loop that opened it: one
# adapter per loop and configuration, reused across turns.
_ADAPTERS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[object, ...], ModelAdapter]
] = weakref.WeakKeyDictionary()


def adapter_from_settings() -> ModelAdapter:
    """The configured adapter: OpenAI when a key is set (or forced), else the demo model."""
    conf = runtime_settings()
    key = (
        conf["MODEL_ADAPTER"],
        conf["OPENAI_API_KEY"],
        conf["OPENAI_BASE_URL"],
        conf["OPENAI_MODEL"],
        float(conf["OPENAI_TIMEOUT_SECONDS"]),
        int(conf["OPENAI_MAX_RETRIES"]),
        str(conf["OPENAI_SYSTEM_ROLE"]),
    )
    per_loop = _ADAPTERS.setdefault(asyncio.get_running_loop(), {})
    adapter = per_loop.get(key)
    if adapter is None:
        adapter = per_loop[key] = _build_adapter(*key)
    return adapter


def _build_adapter(
    kind: object,
    api_key: object,
    base_url: object,
    model: object,
    timeout: float,
    max_retries: int,
    system_role: str,
) -> ModelAdapter:
    if kind == "openai" or (kind == "auto" and api_key):
        from copilot_runtime.adapters.openai_adapter import OpenAIAdapter

        return OpenAIAdapter(
            api_key=str(api_key or "not-set"),
            base_url=str(base_url) or None,
            model=str(model),
            timeout=timeout,
            max_retries=max_retries,
            system_role=system_role,
        )
    from copilot_runtime.adapters.demo import DemoAdapter

    return DemoAdapter()
