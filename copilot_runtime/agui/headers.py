"""Which request headers travel on to AG-UI agents (``handlers/header-utils.ts``).

``Authorization`` and custom ``x-*`` headers are forwarded, minus the infrastructure, proxy and
platform headers no agent should see from the browser's edge (client topology, tracing ids,
platform credentials).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

DENIED_NAMES = frozenset(
    {
        "x-forwarded-for",
        "x-forwarded-proto",
        "x-forwarded-host",
        "x-forwarded-port",
        "x-forwarded-server",
        "x-real-ip",
        "x-amzn-trace-id",
        "x-amz-cf-id",
        "x-cloud-trace-context",
        "x-cache",
        "x-served-by",
        "x-request-id",
        "x-copilotcloud-public-api-key",
        # Django's own CSRF token is for this runtime, not for agents.
        "x-csrftoken",
    }
)
DENIED_PREFIXES = (
    "x-amz-",
    "x-azure-",
    "x-fastly-",
    "x-vercel-",
    "x-middleware-",
    "x-copilotcloud-",
    "x-cpki-",
)


def header_is_forwarded(name: str) -> bool:
    lower = name.lower()
    if lower != "authorization" and not lower.startswith("x-"):
        return False
    return lower not in DENIED_NAMES and not lower.startswith(DENIED_PREFIXES)


def forwardable_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers to forward, names lowercased."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    return {name.lower(): value for name, value in items if header_is_forwarded(name)}
