"""Agents that remote endpoints announce: listed and runnable without being declared.

A CopilotKit remote endpoint's ``/info`` names its agents; as the TypeScript runtime 1.10.6
does, ``availableAgents`` and v2 ``/info`` list them beside the declared ones (kind
``remote``, run through that endpoint). Each endpoint's answer is cached for
``REMOTE_INFO_TTL_SECONDS`` (agents/remote/discovery.py). An endpoint that cannot be reached
is skipped with a warning, and not asked again until the same time has passed, so listing
never waits on it twice nor fails for it: the declared agents are still listed.
"""

from __future__ import annotations

import asyncio
import logging
import time

from agents.registry import KIND_REMOTE, AgentSpec, agent_get, announced_agents_replace
from agents.remote.config import RemoteEndpoint, remote_endpoints
from agents.remote.discovery import remote_info
from copilot_runtime.conf import runtime_setting
from copilot_runtime.errors import AgentNotFoundError, CopilotKitError

logger = logging.getLogger(__name__)

# Endpoint name -> until when it is not asked again (it failed).
_FAILED_UNTIL: dict[str, float] = {}


def announced_cache_clear() -> None:
    _FAILED_UNTIL.clear()
    announced_agents_replace({})


async def _announced_by(endpoint: RemoteEndpoint) -> list[AgentSpec]:
    now = time.monotonic()
    if _FAILED_UNTIL.get(endpoint.name, 0.0) > now:
        return []
    try:
        info = await remote_info(endpoint, properties={}, frontend_url=None)
    except Exception as exc:  # unreachable, timed out, refused, not JSON: all degrade the same
        ttl = max(float(runtime_setting("REMOTE_INFO_TTL_SECONDS")), 1.0)
        _FAILED_UNTIL[endpoint.name] = now + ttl
        logger.warning(
            "remote endpoint %r could not list its agents (%s); listing the declared agents "
            "only, asking again in %.0f s",
            endpoint.name,
            exc,
            ttl,
        )
        return []
    _FAILED_UNTIL.pop(endpoint.name, None)
    return [
        AgentSpec(
            name=str(agent["name"]),
            description=str(agent.get("description") or ""),
            kind=KIND_REMOTE,
            options={"endpoint": endpoint.name, "agent": str(agent["name"])},
        )
        for agent in info.agents
    ]


async def announced_agents_refresh() -> None:
    """Ask every remote endpoint (cached) which agents it serves, and register them."""
    try:
        endpoints = remote_endpoints()
    except CopilotKitError as error:
        logger.warning("REMOTE_ENDPOINTS is misconfigured, no agents discovered: %s", error)
        return
    if not endpoints:
        announced_agents_replace({})
        return
    answers = await asyncio.gather(*(_announced_by(endpoint) for endpoint in endpoints))
    found: dict[str, AgentSpec] = {}
    for specs in answers:
        for spec in specs:
            found.setdefault(spec.name, spec)  # the first endpoint announcing a name serves it
    announced_agents_replace(found)


async def agent_resolve(name: str) -> AgentSpec:
    """The agent called ``name``, asking the remote endpoints when it is not declared (a
    worker process, or an agent announced since the last listing)."""
    try:
        return agent_get(name)
    except AgentNotFoundError:
        if not runtime_setting("REMOTE_ENDPOINTS"):
            raise
    await announced_agents_refresh()
    return agent_get(name)
