"""The ASGI lifespan of the runtime. On startup, load the URLconf and settle the garbage
collector for a long-lived process (``collector.py``: the loaded application frozen out of
its sight). On shutdown, close what this process opened for its turns (the PostgreSQL turn
store's connection pools, the model adapters' HTTP pools), so a restart leaves no half-closed
sessions behind. Route ``"lifespan"`` to it in the ASGI application (the standalone site does;
a host project may add it beside its own)."""

from __future__ import annotations

import logging
from importlib import import_module
from typing import Any

from django.conf import settings

from conversations.store import turn_store_close
from copilot_runtime.adapters import adapters_close
from copilot_runtime.collector import settle_collector
from copilot_runtime.engine.task_publish import task_publish_close

logger = logging.getLogger(__name__)


async def close_turn_resources() -> None:
    """Close the connections this event loop opened for turns. Never raises: a failing close
    must not hold up a shutdown."""
    for close, what in (
        (turn_store_close, "the turn store"),
        (adapters_close, "the adapters"),
        (task_publish_close, "the task queue"),
    ):
        try:
            await close()
        except Exception:
            logger.exception("closing the connections of %s failed", what)


async def lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            # The URLconf (and the views it includes) is otherwise imported by the first request:
            # loaded now, it is frozen with the rest of the application.
            import_module(settings.ROOT_URLCONF)
            settle_collector()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await close_turn_resources()
            await send({"type": "lifespan.shutdown.complete"})
            return
