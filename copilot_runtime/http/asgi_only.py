"""Streaming needs ASGI: under WSGI (Django's runserver, gunicorn's sync workers) a run would
stream no text and be stored as cancelled, so a request that would stream is refused with the
fix named. Everything else (``/info``, the threads API, GraphQL queries) is served either way.
"""

from __future__ import annotations

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse

from copilot_runtime.http.responses import json_error

ASGI_REQUIRED = (
    "The Copilot runtime streams its answers and needs an ASGI server; this request came "
    "through WSGI (Django's runserver, gunicorn's sync workers...), where a run would stream no "
    "text. Serve the project with `uvicorn <project>.asgi:application` (or add 'daphne' first in "
    "INSTALLED_APPS for runserver)."
)


def streams_over_wsgi(request: HttpRequest, *, streaming: bool) -> bool:
    return streaming and not isinstance(request, ASGIRequest)


def asgi_required() -> HttpResponse:
    # 501: this deployment cannot serve the request at all, whatever the client sends.
    return json_error(501, "asgi_required", ASGI_REQUIRED)
