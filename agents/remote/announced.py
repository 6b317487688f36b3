"""Agents that remote endpoints and LangGraph deployments announce: listed and runnable
without being declared.

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
from collections.abc import Awaitable, Callable
from functools import partial

from agents.langgraph_platform.config import langgraph_deployments
from agents.langgraph_platform.discovery import deployment_agents
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


async def _asked(source: str, ask: Callable[[], Awaitable[list[AgentSpec]]]) -> list[AgentSpec]:
    """What ``source`` announces; nothing (and a warning) when it cannot be asked, and it is
    not asked again for the TTL."""
    now = time.monotonic()
    if _FAILED_UNTIL.get(source, 0.0) > now:
        return []
    try:
        specs = await ask()
    except Exception as exc:  # unreachable, timed out, refused, not JSON: all degrade the same
        ttl = max(float(runtime_setting("REMOTE_INFO_TTL_SECONDS")), 1.0)
        _FAILED_UNTIL[source] = now + ttl
        logger.warning(
            "%s could not list its agents (%s); listing the others only, asking again in %.0f s",
            source,
            exc,
            ttl,
        )
        return []
    _FAILED_UNTIL.pop(source, None)
    return specs


async def _announced_by(endpoint: RemoteEndpoint) -> list[AgentSpec]:
    info = await remote_info(endpoint, properties={}, frontend_url=None)
    return [
        AgentSpec(
            name=str(agent["name"]),
            description=str(agent.get("description") or ""),
            kind=KIND_REMOTE,
            options={"endpoint": endpoint.name, "agent": str(agent["name"])},
        )
        for agent in info.agents
    ]


def _sources() -> list[tuple[str, Callable[[], Awaitable[list[AgentSpec]]]]]:
    sources: list[tuple[str, Callable[[], Awaitable[list[AgentSpec]]]]] = []
    try:
        for endpoint in remote_endpoints():
            sources.append((f"remote endpoint {endpoint.name!r}", partial(_announced_by, endpoint)))
        for setting in langgraph_deployments():
            sources.append((setting.deployment.label, partial(deployment_agents, setting)))
    except CopilotKitError as error:
        logger.warning("agent sources are misconfigured, none discovered: %s", error)
    return sources


def _has_sources() -> bool:
    return bool(runtime_setting("REMOTE_ENDPOINTS") or runtime_setting("LANGGRAPH_DEPLOYMENTS"))


async def announced_agents_refresh() -> None:
    """Ask every remote endpoint and LangGraph deployment (cached) which agents it serves,
    and register them."""
    sources = _sources() if _has_sources() else []
    if not sources:
        announced_agents_replace({})
        return
    answers = await asyncio.gather(*(_asked(name, ask) for name, ask in sources))
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
        if not _has_sources():
            raise
    await announced_agents_refresh()
    return agent_get(name)
