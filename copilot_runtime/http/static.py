"""Static files (the admin's) under daphne, without making every request synchronous.

WhiteNoise's middleware is synchronous only, so placed in the stack it makes Django hop to a
thread and back for every request, the streaming API included. This async middleware hands
only requests under ``STATIC_URL`` to WhiteNoise.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from asgiref.sync import markcoroutinefunction, sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware:
    sync_capable = False
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Awaitable[HttpResponse]]) -> None:
        self.get_response = get_response
        self._prefix = "/" + settings.STATIC_URL.lstrip("/")
        # WhiteNoise answers the files it has and calls this for the others.
        self._whitenoise = WhiteNoiseMiddleware(lambda request: None)
        markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info.startswith(self._prefix):
            response = await sync_to_async(self._whitenoise, thread_sensitive=False)(request)
            if response is not None:
                return response
        return await self.get_response(request)
