"""The ASGI lifespan of the runtime. On startup, load the URLconf and settle the garbage
collector for a long-lived process (``collector.py``: the loaded application frozen out of
its sight). On shutdown, close what this process opened for its turns (the PostgreSQL turn
store's connection pools, the model adapters' HTTP pools), so a restart leaves no half-closed
sessions behind.

``copilot_runtime.routing.runtime_application`` routes ``"lifespan"`` here, composed with the
host's own lifespan when it has one. A server that sends no lifespan events (daphne) gets the
startup's work on the first request instead (``started_if_not_yet``); its pools then close
with the process, which the database logs as a client that went away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from importlib import import_module
from typing import Any

from django.conf import settings

from copilot_runtime.collector import settle_collector
from copilot_runtime.runs.resources import close_turn_resources

logger = logging.getLogger(__name__)

Message = dict[str, Any]
ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]

_started = False


def runtime_started() -> None:
    """The startup's work: the URLconf (and the views it includes) is otherwise imported by
    the first request; loaded now, it is frozen with the rest of the application."""
    global _started
    _started = True
    import_module(settings.ROOT_URLCONF)
    settle_collector()


def started_if_not_yet() -> None:
    """For servers without lifespan events: the startup's work, once, before the first
    request is served."""
    if not _started:
        runtime_started()


async def lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            runtime_started()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await close_turn_resources()
            await send({"type": "lifespan.shutdown.complete"})
            return


def lifespan_with(host: ASGIApp) -> ASGIApp:
    """The runtime's lifespan and the host's in one: the host's startup first, then ours; at
    shutdown ours first (the runs' connections), then the host's. A host application that
    does not speak lifespan (it raises or returns, as Django's own handler does) is left out."""

    async def composed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        to_host: asyncio.Queue[Message] = asyncio.Queue()
        from_host: asyncio.Queue[Message] = asyncio.Queue()
        hosted = asyncio.create_task(host(scope, to_host.get, from_host.put))

        async def ask_host(message: Message) -> Message | None:
            """The host's answer to ``message``, or None when it has no lifespan."""
            if hosted.done():
                return None
            await to_host.put(message)
            answer = asyncio.ensure_future(from_host.get())
            await asyncio.wait({answer, hosted}, return_when=asyncio.FIRST_COMPLETED)
            if answer.done():
                return answer.result()
            answer.cancel()
            if not hosted.cancelled() and hosted.exception() is not None:
                logger.info("the host application has no lifespan: %s", hosted.exception())
            return None

        try:
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    answer = await ask_host(message)
                    if answer is not None and answer["type"] == "lifespan.startup.failed":
                        await send(answer)
                        return
                    runtime_started()
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await close_turn_resources()
                    answer = await ask_host(message)
                    await send(answer or {"type": "lifespan.shutdown.complete"})
                    return
        finally:
            if not hosted.done():
                hosted.cancel()
            with contextlib.suppress(BaseException):
                await hosted

    return composed
