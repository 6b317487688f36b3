"""Who is calling: a bearer API token, the Django session, or nobody.

``check_*`` functions decide and raise; ``do_*`` functions change state.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone

from conversations.store.health import db_sync_to_async
from copilot_runtime.conf import anonymous_allowed
from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.http.cors import origin_listed
from copilot_runtime.models import ApiToken, token_generate, token_hash

# Recording every use would be a write per request; once a minute is precise enough.
_LAST_USED_RESOLUTION = dt.timedelta(minutes=1)


@dataclass(frozen=True)
class Caller:
    user: AbstractBaseUser | AnonymousUser
    via: str  # "token", "session" or "anonymous"

    @property
    def is_anonymous(self) -> bool:
        return not self.user.is_authenticated


class AuthenticationFailed(CopilotKitError):
    def __init__(self, message: str) -> None:
        super().__init__(message, code=ErrorCode.AUTHENTICATION_ERROR)


def _bearer_token(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def token_user(raw_token: str) -> AbstractBaseUser | None:
    """The user of an active token (recording its use), or None."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(token_hash=token_hash(raw_token), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > _LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


def origin_is_allowed(request: HttpRequest) -> bool:
    origin = request.headers.get("Origin")
    return bool(origin) and origin_listed(origin)


def check_csrf(request: HttpRequest) -> None:
    """A cookie-authenticated POST must pass Django's CSRF check or come from an allowed origin."""
    if origin_is_allowed(request):
        return

    def _view() -> None:  # a stand-in view: not csrf_exempt, so the check really runs
        return None

    refusal = CsrfViewMiddleware(lambda r: None).process_view(request, _view, (), {})
    if refusal is not None:
        raise AuthenticationFailed(
            "CSRF verification failed: send the csrftoken cookie's value in X-CSRFToken, "
            "use a bearer token, or call from an allowed origin."
        )


async def resolve_caller(request: HttpRequest) -> Caller:
    """The caller of a runtime request; raises AuthenticationFailed when refused."""
    raw_token = _bearer_token(request)
    if raw_token is not None:
        user = await db_sync_to_async(token_user)(raw_token)
        if user is None:
            raise AuthenticationFailed("The bearer token is unknown or revoked.")
        return Caller(user=user, via="token")

    user = await request.auser()
    if user.is_authenticated:
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            check_csrf(request)
        return Caller(user=user, via="session")

    if not anonymous_allowed():
        raise AuthenticationFailed(
            "Authentication required: log in or send 'Authorization: Bearer <token>'."
        )
    return Caller(user=AnonymousUser(), via="anonymous")


@transaction.atomic
def do_issue_token(*, user: AbstractBaseUser, name: str) -> tuple[ApiToken, str]:
    """Create a token for ``user``; returns the row and the raw token (shown only once)."""
    raw = token_generate()
    token = ApiToken.objects.create(
        name=name, user=user, token_hash=token_hash(raw), token_prefix=raw[:10]
    )
    return token, raw


@transaction.atomic
def do_revoke_token(*, token: ApiToken) -> ApiToken:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token
