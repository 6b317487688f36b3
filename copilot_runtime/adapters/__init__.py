"""LLM service adapters, chosen in settings: the runtime's (``ADAPTER``) and, per agent,
``AGENTS[name]["adapter"]``.

An adapter setting is a dict naming its ``kind`` and that kind's options (the model, its
parameters, credentials); the kinds are in :mod:`copilot_runtime.adapters.kinds`. Without
``ADAPTER`` the runtime's adapter comes from ``MODEL_ADAPTER`` and the ``OPENAI_*`` settings,
as before: OpenAI-compatible when a key is set, else the offline demo model.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import Any

import orjson

from copilot_runtime.adapters.base import ModelAdapter
from copilot_runtime.adapters.kinds import adapter_build, adapter_spec_check
from copilot_runtime.conf import DEFAULTS, runtime_settings

# Adapters hold an HTTP connection pool, which belongs to the event loop that opened it: one
# adapter per loop and configuration, reused across turns.
_ADAPTERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[bytes, ModelAdapter]] = (
    weakref.WeakKeyDictionary()
)


def runtime_adapter_spec() -> dict[str, Any]:
    """The runtime's adapter setting (``ADAPTER``, else derived from the ``OPENAI_*`` ones)."""
    conf = runtime_settings()
    configured = conf.get("ADAPTER")
    if isinstance(configured, dict) and configured:
        return dict(configured)
    # In a host project the model comes from COPILOT_RUNTIME, else from the environment
    # variables the standalone site reads.
    api_key = conf["OPENAI_API_KEY"] or os.environ.get("OPENAI_API_KEY", "")
    kind = conf["MODEL_ADAPTER"]
    if kind == "auto":
        kind = "openai" if api_key else "demo"
    if kind != "openai":
        return {"kind": kind}
    return {
        "kind": "openai",
        "api_key": api_key,
        "base_url": conf["OPENAI_BASE_URL"] or os.environ.get("OPENAI_BASE_URL", ""),
        "model": conf["OPENAI_MODEL"]
        if conf["OPENAI_MODEL"] != DEFAULTS["OPENAI_MODEL"]
        else os.environ.get("OPENAI_MODEL") or conf["OPENAI_MODEL"],
        "timeout_seconds": float(conf["OPENAI_TIMEOUT_SECONDS"]),
        "max_retries": int(conf["OPENAI_MAX_RETRIES"]),
        "system_role": str(conf["OPENAI_SYSTEM_ROLE"]),
    }


def adapter_spec_for(agent_name: str | None) -> dict[str, Any]:
    """The adapter setting an agent runs on: its own ``adapter``, else the runtime's."""
    if agent_name:
        agents = runtime_settings().get("AGENTS") or {}
        own = (agents.get(agent_name) or {}).get("adapter")
        if isinstance(own, dict) and own:
            return dict(own)
    return runtime_adapter_spec()


def adapter_from_settings(agent_name: str | None = None) -> ModelAdapter:
    """The adapter of ``agent_name`` (the runtime's when None), built once per event loop."""
    spec = adapter_spec_for(agent_name)
    key = orjson.dumps(spec, option=orjson.OPT_SORT_KEYS, default=str)
    per_loop = _ADAPTERS.setdefault(asyncio.get_running_loop(), {})
    adapter = per_loop.get(key)
    if adapter is None:
        adapter = per_loop[key] = adapter_build(spec)
    return adapter


async def adapters_close() -> None:
    """Close the connection pools of the adapters this event loop built (at shutdown; the
    next turn would build new ones)."""
    for adapter in _ADAPTERS.pop(asyncio.get_running_loop(), {}).values():
        close = getattr(adapter, "aclose", None)
        if close is not None:
            await close()


__all__ = [
    "ModelAdapter",
    "adapter_from_settings",
    "adapter_spec_check",
    "adapter_spec_for",
    "adapters_close",
    "runtime_adapter_spec",
]
