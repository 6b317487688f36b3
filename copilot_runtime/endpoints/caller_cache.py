"""Who is calling, resolved without Django's middleware and cached for a few seconds.

The hot endpoints (``copilot_runtime/endpoints/front.py``) skip Django's session and auth
middleware, so they resolve the caller here with the same rules as ``auth.resolve_caller``:
a bearer token, else the session cookie (a POST then passes the CSRF check or comes from an
allowed origin), else anonymous when allowed. A token's or a session's user is remembered for
``AUTH_CACHE_SECONDS`` so a conversation's requests cost no lookup each; a revoked token or a
logged-out session is refused once that time has passed (two seconds by default).
"""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware
from django.utils.module_loading import import_string

from conversations.store.health import db_sync_to_async
from copilot_runtime.auth import AuthenticationFailed, Caller, check_csrf, token_user
from copilot_runtime.conf import anonymous_allowed, runtime_setting
from copilot_runtime.models import token_hash

__all__ = ["AuthenticationFailed", "caller_cache_clear", "resolve_caller_cached"]

_MAX_ENTRIES = 10_000
_cache: dict[str, tuple[float, AbstractBaseUser | None]] = {}


def caller_cache_clear() -> None:
    _cache.clear()


def _remember(key: str, user: AbstractBaseUser | None) -> None:
    if len(_cache) >= _MAX_ENTRIES:
        _cache.clear()
    _cache[key] = (time.monotonic() + float(runtime_setting("AUTH_CACHE_SECONDS")), user)


def _recall(key: str) -> tuple[bool, AbstractBaseUser | None]:
    entry = _cache.get(key)
    if entry is None or entry[0] < time.monotonic():
        return False, None
    return True, entry[1]


def _bearer(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def _session_user(request: HttpRequest, session_key: str) -> AbstractBaseUser | AnonymousUser:
    engine = import_string(settings.SESSION_ENGINE)
    request.session = engine.SessionStore(session_key)  # type: ignore[attr-defined]
    return get_user(request)  # type: ignore[arg-type]


async def resolve_caller_cached(request: HttpRequest) -> Caller:
    raw_token = _bearer(request)
    if raw_token is not None:
        key = "token:" + token_hash(raw_token)
        known, user = _recall(key)
        if not known:
            user = await db_sync_to_async(token_user)(raw_token)
            _remember(key, user)
        if user is None:
            raise AuthenticationFailed("The bearer token is unknown or revoked.")
        return Caller(user=user, via="token")

    session_key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if session_key:
        key = "session:" + session_key
        known, user = _recall(key)
        if not known:
            found = await db_sync_to_async(_session_user)(request, session_key)
            user = found if found.is_authenticated else None
            _remember(key, user)
        if user is not None:
            # The CSRF middleware did not run: read the token cookie the way it would.
            CsrfViewMiddleware(lambda r: None).process_request(request)
            check_csrf(request)
            return Caller(user=user, via="session")

    if not anonymous_allowed():
        raise AuthenticationFailed(
            "Authentication required: log in or send 'Authorization: Bearer <token>'."
        )
    return Caller(user=AnonymousUser(), via="anonymous")
