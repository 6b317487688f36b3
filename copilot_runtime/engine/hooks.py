"""``on_before_request`` / ``on_after_request`` middleware hooks from settings.

Each is a dotted path to a callable (sync or async) taking one ``RequestHookContext``, the
fields the TypeScript runtime passes. A failing ``on_after_request`` is logged and never
breaks the response; a failing ``on_before_request`` fails the request before the model runs.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.utils.module_loading import import_string

from copilot_runtime.conf import runtime_setting

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestHookContext:
    thread_id: str
    run_id: str
    input_messages: list[dict[str, Any]]
    properties: dict[str, Any]
    url: str | None
    output_messages: list[dict[str, Any]] = field(default_factory=list)


def _hook(name: str) -> Callable[[RequestHookContext], Any] | None:
    target = runtime_setting(name)
    if not target:
        return None
    return import_string(target) if isinstance(target, str) else target


async def _call(hook: Callable[[RequestHookContext], Any], context: RequestHookContext) -> None:
    if inspect.iscoroutinefunction(hook):
        await hook(context)
    else:
        await sync_to_async(hook, thread_sensitive=False)(context)


def before_request_configured() -> bool:
    """Whether a hook is set: callers build the context (a copy of the whole history, work
    that grows with the thread) only then."""
    return bool(runtime_setting("ON_BEFORE_REQUEST"))


def after_request_configured() -> bool:
    return bool(runtime_setting("ON_AFTER_REQUEST"))


async def call_before_request(context: RequestHookContext) -> None:
    hook = _hook("ON_BEFORE_REQUEST")
    if hook is not None:
        await _call(hook, context)


async def call_after_request(context: RequestHookContext) -> None:
    hook = _hook("ON_AFTER_REQUEST")
    if hook is None:
        return
    try:
        await _call(hook, context)
    except Exception:
        logger.exception(
            "on_after_request failed for run %s; the response is unaffected", context.run_id
        )
