"""Remote endpoints from settings::

    "REMOTE_ENDPOINTS": [
        {
            "name": "python-tools",                        # how errors and agents name it
            "url": "http://127.0.0.1:8001/copilotkit",
            "headers": "myapp.remote.headers",             # or a dict; optional
            "timeout_seconds": 60,                         # longest silence while reading
            "offer_actions": True,                         # its actions -> the chat engine
        },
    ],

A headers hook takes a ``PeerCallContext`` (endpoint name, URL, the request's properties,
thread id, agent name) and returns a dict of headers; it may be sync or async.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.peer_http import Peer
from copilot_runtime.conf import runtime_setting
from copilot_runtime.errors import CopilotKitError, ErrorCode

REMOTE_ENDPOINT_KIND = "remote endpoint"


@dataclass(frozen=True)
class RemoteEndpoint:
    peer: Peer
    offer_actions: bool = True

    @property
    def name(self) -> str:
        return self.peer.name


def _endpoint(index: int, raw: Any) -> RemoteEndpoint:
    if not isinstance(raw, dict) or not raw.get("url"):
        raise CopilotKitError(
            f"COPILOT_RUNTIME['REMOTE_ENDPOINTS'][{index}] needs at least a 'url'.",
            code=ErrorCode.CONFIGURATION_ERROR,
        )
    url = str(raw["url"])
    timeout = raw.get("timeout_seconds")
    return RemoteEndpoint(
        peer=Peer(
            kind=REMOTE_ENDPOINT_KIND,
            name=str(raw.get("name") or url),
            url=url,
            headers=raw.get("headers"),
            timeout_seconds=float(timeout) if timeout else None,
        ),
        offer_actions=bool(raw.get("offer_actions", True)),
    )


def remote_endpoints() -> list[RemoteEndpoint]:
    return [_endpoint(i, raw) for i, raw in enumerate(runtime_setting("REMOTE_ENDPOINTS") or [])]


def remote_endpoint_get(name: str) -> RemoteEndpoint:
    for endpoint in remote_endpoints():
        if endpoint.name == name:
            return endpoint
    raise CopilotKitError(
        f"No remote endpoint named '{name}' in COPILOT_RUNTIME['REMOTE_ENDPOINTS'].",
        code=ErrorCode.REMOTE_ENDPOINT_NOT_FOUND,
    )
