"""Health checks for load balancers: ``/healthz`` (alive) and ``/readyz`` (dependencies)."""

from __future__ import annotations

import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

logger = logging.getLogger(__name__)


async def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any driver error means "not ready"
        logger.warning("readyz: database unavailable: %s", exc)
        return "database unavailable"
    return None


async def _check_redis(url: str) -> str | None:
    import redis.asyncio as redis

    client = redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        await client.ping()
    except Exception as exc:  # connection refused, timeout, auth...
        logger.warning("readyz: redis unavailable: %s", exc)
        return "redis unavailable"
    finally:
        await client.aclose()
    return None


async def readyz(request: HttpRequest) -> JsonResponse:
    problems = []
    if (problem := await sync_to_async(_check_database)()) is not None:
        problems.append(problem)
    redis_url = getattr(settings, "REDIS_URL", "")
    if redis_url and (problem := await _check_redis(redis_url)) is not None:
        problems.append(problem)
    if problems:
        return JsonResponse({"status": "unavailable", "problems": problems}, status=503)
    return JsonResponse({"status": "ok"})
