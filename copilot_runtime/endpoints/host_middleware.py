"""What the front does about the project's ``MIDDLEWARE`` on the two hot endpoints.

The front (``front.py``) answers the v1 ``generateCopilotResponse`` and the v2 run without
Django's handler, so the middleware stack does not run for them. Each kind of middleware is
decided here once:

- **honoured**: Django's ``SecurityMiddleware`` (its HTTPS redirect and response headers),
  ``CommonMiddleware`` (disallowed user agents, the ``www.`` and trailing-slash redirects) and
  ``XFrameOptionsMiddleware`` are run by the front itself, their request and response hooks
  called directly (they are synchronous and touch no database);
- **replaced**: sessions, authentication and CSRF (the front resolves the caller with the same
  rules: a bearer token, else the session cookie with Django's CSRF check, else anonymous when
  allowed) and the runtime's own CORS middleware (the front answers CORS the same way);
- **not needed**: middleware with nothing to do on these two requests (messages, static
  files, locale, conditional GET, GZip, which would only buffer a stream);
- **anything else** (the project's own logging, tracing, rate limiting...) the front cannot
  honour: ``manage.py check`` warns (``copilot_runtime.W010``) naming it, and
  ``COPILOT_RUNTIME["HOT_PATHS_THROUGH_DJANGO"] = True`` sends the two endpoints through
  Django's handler and the whole stack instead, at the cost the README's figures show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

HONOURED = (
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
)
REPLACED = (
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "copilot_runtime.http.cors.RuntimeCorsMiddleware",
)
NOT_NEEDED = (
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.http.ConditionalGetMiddleware",
    "django.middleware.gzip.GZipMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "copilot_runtime.http.static.StaticFilesMiddleware",
)


def bypassed_middleware(middleware: Sequence[str]) -> list[str]:
    """The entries of ``MIDDLEWARE`` the front neither honours nor replaces."""
    known = {*HONOURED, *REPLACED, *NOT_NEEDED}
    return [path for path in middleware if path not in known]


def _unused(request: HttpRequest) -> HttpResponse:  # pragma: no cover - never called
    raise AssertionError("the front calls the middleware's hooks, never its chain")


class HonouredMiddleware:
    """The project's honoured middleware, in its order: ``before`` may answer the request
    itself (a redirect, a refusal), ``after`` decorates the front's response."""

    def __init__(self, middleware: Sequence[str]) -> None:
        chosen = [import_string(path)(_unused) for path in middleware if path in HONOURED]
        self._requests: list[Callable[[HttpRequest], HttpResponse | None]] = [
            m.process_request for m in chosen if hasattr(m, "process_request")
        ]
        # Django runs response hooks bottom-up.
        self._responses: list[Callable[[HttpRequest, HttpResponse], HttpResponse]] = [
            m.process_response for m in reversed(chosen) if hasattr(m, "process_response")
        ]

    def before(self, request: HttpRequest) -> HttpResponse | None:
        for hook in self._requests:
            response = hook(request)
            if response is not None:
                return response
        return None

    def after(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        for hook in self._responses:
            response = hook(request, response)
        return response


def honoured_middleware() -> HonouredMiddleware:
    return HonouredMiddleware(list(getattr(settings, "MIDDLEWARE", [])))
