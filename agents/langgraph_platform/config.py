"""Where a LangGraph agent runs: its deployment and assistant.

"AGENTS": {
    "forecaster": {
        "kind": "langgraph",
        "url": "https://my-deployment.langgraph.app",   # the deployment
        "api_key": "lsv2_...",        # optional; else LANGSMITH_API_KEY / LANGGRAPH_API_KEY
        "assistant": "forecaster",    # a graph id or an assistant id; default: the name
    },
},
"LANGGRAPH_DEPLOYMENTS": [
    # Every assistant of the deployment becomes an agent (named after the assistant),
    # unless "agents" lists the ones to expose: [{"name", "assistant"?, "description"?}].
    {"url": "http://127.0.0.1:2024", "api_key": None},
],
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from agents.registry import AgentSpec
from copilot_runtime.conf import runtime_setting
from copilot_runtime.errors import CopilotKitError, ErrorCode


@dataclass(frozen=True)
class Deployment:
    url: str
    api_key: str | None = None

    @property
    def label(self) -> str:
        return f"LangGraph deployment {self.url}"


def _api_key(raw: Any) -> str | None:
    if isinstance(raw, str) and raw:
        return raw
    return os.environ.get("LANGSMITH_API_KEY") or os.environ.get("LANGGRAPH_API_KEY") or None


def langgraph_target(spec: AgentSpec) -> tuple[Deployment, str]:
    """The deployment serving the agent and the assistant (or graph id) to run."""
    url = spec.options.get("url")
    if not isinstance(url, str) or not url:
        raise CopilotKitError(
            f"Agent '{spec.name}' (kind 'langgraph') needs a 'url': its LangGraph deployment.",
            code=ErrorCode.CONFIGURATION_ERROR,
        )
    assistant = spec.options.get("assistant") or spec.name
    return Deployment(url=url.rstrip("/"), api_key=_api_key(spec.options.get("api_key"))), str(
        assistant
    )


@dataclass(frozen=True)
class DeploymentSetting:
    deployment: Deployment
    # The agents to expose ({"name", "assistant", "description"}); None: every assistant.
    agents: list[dict[str, Any]] | None


def langgraph_deployments() -> list[DeploymentSetting]:
    settings: list[DeploymentSetting] = []
    for index, raw in enumerate(runtime_setting("LANGGRAPH_DEPLOYMENTS") or []):
        if not isinstance(raw, dict) or not isinstance(raw.get("url"), str) or not raw["url"]:
            raise CopilotKitError(
                f"COPILOT_RUNTIME['LANGGRAPH_DEPLOYMENTS'][{index}] needs a 'url'.",
                code=ErrorCode.CONFIGURATION_ERROR,
            )
        agents = raw.get("agents")
        settings.append(
            DeploymentSetting(
                deployment=Deployment(
                    url=raw["url"].rstrip("/"), api_key=_api_key(raw.get("api_key"))
                ),
                agents=[a for a in agents if isinstance(a, dict) and a.get("name")]
                if isinstance(agents, list)
                else None,
            )
        )
    return settings
