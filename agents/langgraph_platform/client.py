"""One ``langgraph-sdk`` client per deployment and event loop (its HTTP pool belongs to the
loop that opened it, as the model adapters' do)."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from agents.langgraph_platform.config import Deployment

_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Deployment, Any]] = (
    weakref.WeakKeyDictionary()
)


def deployment_client(deployment: Deployment) -> Any:
    # Imported on use: the SDK is needed only where a LangGraph agent is configured.
    from langgraph_sdk import get_client

    per_loop = _CLIENTS.setdefault(asyncio.get_running_loop(), {})
    client = per_loop.get(deployment)
    if client is None:
        client = per_loop[deployment] = get_client(url=deployment.url, api_key=deployment.api_key)
    return client
