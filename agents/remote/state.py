"""``POST {url}/agents/state``: what a remote endpoint itself knows of an agent's thread.

loadAgentState answers from Postgres for every agent kind (see
``conversations.selectors.agent_state_load`` for why Postgres wins); this asks the endpoint,
for tools and for an application that wants the endpoint's own view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.peer_http import PeerCallContext, peer_post_json
from agents.registry import AgentSpec
from agents.remote.runner import remote_agent_target
from agents.remote.runtime_events import parse_state


@dataclass(frozen=True)
class RemoteAgentState:
    thread_id: str
    thread_exists: bool
    state: dict[str, Any] = field(default_factory=dict)
    messages: list[Any] = field(default_factory=list)


async def remote_agent_state(
    spec: AgentSpec, *, thread_id: str, properties: dict[str, Any] | None = None
) -> RemoteAgentState:
    endpoint, remote_name = remote_agent_target(spec)
    properties = dict(properties or {})
    answer = await peer_post_json(
        endpoint.peer,
        path="agents/state",
        body={"properties": properties, "threadId": thread_id, "name": remote_name},
        context=PeerCallContext(
            peer_name=endpoint.name,
            url=endpoint.peer.url_for("agents/state"),
            properties=properties,
            thread_id=thread_id,
            agent_name=spec.name,
        ),
    )
    answer = answer if isinstance(answer, dict) else {}
    messages = answer.get("messages")
    return RemoteAgentState(
        thread_id=str(answer.get("threadId") or thread_id),
        thread_exists=bool(answer.get("threadExists")),
        state=parse_state(answer.get("state")),
        messages=messages if isinstance(messages, list) else [],
    )
