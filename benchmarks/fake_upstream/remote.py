"""Control a fake upstream running in another process through its `/_fake/*` endpoints.

Standard library only (urllib), so any test or script can use these without extra clients.
`base_url` may be the server root or the OpenAI base URL ending in `/v1`.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from typing import Any

_TIMEOUT_S = 10.0


def script_remote(base_url: str, *directives: Mapping[str, Any]) -> int:
    """Queue directives; returns the queue length. Invalid directives raise `HTTPError` 400."""
    answer = _call(base_url, "POST", "script", {"responses": list(directives)})
    return int(answer["queued"])


def reset_remote(base_url: str) -> None:
    _call(base_url, "POST", "reset", {})


def stats_remote(base_url: str) -> dict[str, int]:
    return dict(_call(base_url, "GET", "stats", None))


def requests_remote(base_url: str) -> list[dict[str, Any]]:
    return list(_call(base_url, "GET", "requests", None))


def control_url(base_url: str, endpoint: str) -> str:
    root = base_url.rstrip("/").removesuffix("/v1")
    return f"{root}/_fake/{endpoint}"


def _call(base_url: str, method: str, endpoint: str, payload: object | None) -> Any:
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(
        control_url(base_url, endpoint),
        data=data,
        method=method,
        headers={"content-type": "application/json"} if data is not None else {},
    )
    with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
        return json.loads(response.read())
