"""The agents a LangGraph deployment offers (``LANGGRAPH_DEPLOYMENTS``): the listed ones, or
every assistant the deployment has (``assistants.search``) when none are listed."""

from __future__ import annotations

from typing import Any

from agents.langgraph_platform.client import deployment_client
from agents.langgraph_platform.config import DeploymentSetting
from agents.registry import KIND_LANGGRAPH, AgentSpec

_SEARCH_LIMIT = 100


def _spec(setting: DeploymentSetting, name: str, assistant: str, description: str) -> AgentSpec:
    options: dict[str, Any] = {"url": setting.deployment.url, "assistant": assistant}
    if setting.deployment.api_key:
        options["api_key"] = setting.deployment.api_key
    return AgentSpec(name=name, description=description, kind=KIND_LANGGRAPH, options=options)


async def deployment_agents(setting: DeploymentSetting) -> list[AgentSpec]:
    """Raises whatever the SDK raises when the deployment cannot be asked."""
    if setting.agents is not None:
        return [
            _spec(
                setting,
                str(agent["name"]),
                str(agent.get("assistant") or agent["name"]),
                str(agent.get("description") or ""),
            )
            for agent in setting.agents
        ]
    client = deployment_client(setting.deployment)
    assistants = await client.assistants.search(limit=_SEARCH_LIMIT)
    specs = []
    for assistant in assistants:
        name = str(assistant.get("name") or assistant.get("graph_id") or "")
        if not name:
            continue
        metadata = assistant.get("metadata") if isinstance(assistant.get("metadata"), dict) else {}
        description = assistant.get("description") or metadata.get("description") or ""
        specs.append(_spec(setting, name, str(assistant["assistant_id"]), str(description)))
    return specs
