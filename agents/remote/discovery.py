"""``POST {url}/info``: a remote endpoint's actions and agents, cached for a short while.

The answer may depend on the request's ``properties`` (the SDK builds actions per context) and
``frontendUrl``, so it is cached per endpoint, properties and URL, for
``REMOTE_INFO_TTL_SECONDS`` (0 disables the cache).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from agents.peer_http import HTTP_ERROR_CODE, PeerCallContext, PeerError, peer_post_json
from agents.remote.config import RemoteEndpoint
from copilot_runtime.conf import runtime_setting
from copilot_runtime.errors import ErrorCode

_CACHE_LIMIT = 256
_CACHE: dict[tuple[str, str, bytes, str], tuple[float, RemoteInfo]] = {}


@dataclass(frozen=True)
class RemoteInfo:
    actions: list[dict[str, Any]] = field(default_factory=list)
    agents: list[dict[str, Any]] = field(default_factory=list)
    sdk_version: str = ""


def remote_info_cache_clear() -> None:
    _CACHE.clear()


def _parse(endpoint: RemoteEndpoint, answer: Any) -> RemoteInfo:
    if not isinstance(answer, dict):
        raise PeerError(
            endpoint.peer,
            "answered /info with something other than a JSON object.",
            run_code=HTTP_ERROR_CODE,
            code=ErrorCode.UNKNOWN,
        )
    actions = [a for a in answer.get("actions") or [] if isinstance(a, dict) and a.get("name")]
    agents = [a for a in answer.get("agents") or [] if isinstance(a, dict) and a.get("name")]
    return RemoteInfo(
        actions=actions, agents=agents, sdk_version=str(answer.get("sdkVersion") or "")
    )


async def remote_info(
    endpoint: RemoteEndpoint,
    *,
    properties: dict[str, Any],
    frontend_url: str | None,
    thread_id: str | None = None,
) -> RemoteInfo:
    key = (
        endpoint.name,
        endpoint.peer.url,
        orjson.dumps(properties, option=orjson.OPT_SORT_KEYS, default=str),
        frontend_url or "",
    )
    now = time.monotonic()
    cached = _CACHE.get(key)
    if cached is not None and cached[0] > now:
        return cached[1]
    body: dict[str, Any] = {"properties": properties}
    if frontend_url:
        body["frontendUrl"] = frontend_url
    context = PeerCallContext(
        peer_name=endpoint.name,
        url=endpoint.peer.url_for("info"),
        properties=properties,
        thread_id=thread_id,
    )
    info = _parse(
        endpoint, await peer_post_json(endpoint.peer, path="info", body=body, context=context)
    )
    ttl = float(runtime_setting("REMOTE_INFO_TTL_SECONDS"))
    if ttl > 0:
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = (now + ttl, info)
    return info
