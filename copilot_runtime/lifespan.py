"""The ASGI lifespan of the runtime. On startup, load the URLconf and settle the garbage
collector for a long-lived process (``collector.py``: the loaded application frozen out of
its sight). On shutdown, close what this process opened for its turns (the PostgreSQL turn
store's connection pools), so a restart leaves no half-closed sessions on the database. Route
``"lifespan"`` to it in the ASGI application (the standalone site does; a host project may
add it beside its own)."""

from __future__ import annotations

import logging
from importlib import import_module
from typing import Any

from django.conf import settings

from conversations.store import turn_store_close
from copilot_runtime.collector import settle_collector

logger = logging.getLogger(__name__)


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
            try:
                await turn_store_close()
            except Exception:  # a failing close must not hold up the shutdown
                logger.exception("closing the turn store's connections failed")
            await send({"type": "lifespan.shutdown.complete"})
            return
