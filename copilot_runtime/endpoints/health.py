"""Health checks for load balancers: ``/healthz`` (alive) and ``/readyz`` (can serve now).

``/readyz`` asks what this process would use for its next request, not fresh clients made for
the check: Django's connection on the thread that serves the hot endpoints' and the runs' ORM
work (checked and healed first, as every unit of work there is), the turn store's pool on this
event loop, the channel layer, and the broker when runs go to Celery workers. A check that
fails names its dependency; none reveals an address or a driver's message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse

from conversations.store.disk import database_disk_full
from conversations.store.health import on_shared_thread

logger = logging.getLogger(__name__)

# Each dependency answers within this, or counts as unavailable.
CHECK_TIMEOUT_SECONDS = 3.0
DATABASE_UNAVAILABLE = "database unavailable"
DATABASE_DISK_FULL = "database disk full"
CHANNEL_LAYER_UNAVAILABLE = "redis unavailable"
BROKER_UNAVAILABLE = "broker unavailable"
# A group nobody joins: sending to it touches the layer's connection and delivers nothing.
_PROBE_GROUP = "copilot-runtime-readyz"


async def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _select_one() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


async def _check_database() -> str | None:
    from conversations.store import turn_store

    try:
        await on_shared_thread(_select_one)
        await turn_store().check()
    except (DatabaseError, OSError) as exc:
        logger.warning("readyz: database unavailable: %s", exc)
        return DATABASE_UNAVAILABLE
    if database_disk_full():
        return DATABASE_DISK_FULL
    return None


async def _check_channel_layer() -> str | None:
    from channels.layers import InMemoryChannelLayer, get_channel_layer

    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return None  # nothing outside the process to reach
    try:
        await layer.group_send(_PROBE_GROUP, {"type": "readyz.probe"})
    except Exception as exc:  # connection refused, timeout, auth...
        logger.warning("readyz: channel layer unavailable: %s", exc)
        return CHANNEL_LAYER_UNAVAILABLE
    return None


async def _check_broker() -> str | None:
    from copilot_runtime.runs.executor import CELERY, broker_ping, executor_kind

    if executor_kind() != CELERY:
        return None

    try:
        await broker_ping()
    except Exception as exc:
        logger.warning("readyz: broker unavailable: %s", exc)
        return BROKER_UNAVAILABLE
    return None


async def _within_timeout(check: Callable[[], Awaitable[str | None]], failed: str) -> str | None:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            return await check()
    except TimeoutError:
        logger.warning("readyz: %s (no answer within %ss)", failed, CHECK_TIMEOUT_SECONDS)
        return failed
    except Exception:  # a failure the check did not foresee still names its dependency
        logger.exception("readyz: %s", failed)
        return failed


async def readyz(request: HttpRequest) -> JsonResponse:
    outcomes = await asyncio.gather(
        _within_timeout(_check_database, DATABASE_UNAVAILABLE),
        _within_timeout(_check_channel_layer, CHANNEL_LAYER_UNAVAILABLE),
        _within_timeout(_check_broker, BROKER_UNAVAILABLE),
    )
    problems = [problem for problem in outcomes if problem is not None]
    if problems:
        return JsonResponse({"status": "unavailable", "problems": problems}, status=503)
    return JsonResponse({"status": "ok"})
