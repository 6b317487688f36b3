"""Running an agent served by a CopilotKit remote endpoint (kind ``remote``)::

    "AGENTS": {"researcher": {"kind": "remote", "endpoint": "python-tools",
                              "agent": "research_agent"}}   # "agent": its name there

``POST {url}/agents/execute`` with the thread's messages, the agent's state and config, the
actions it may call and the answer to a pending interrupt (``metaEvents``); the answer is a
JSON-lines stream in either format (runtime-event lines or LangGraph ``astream_events`` lines,
told apart per line). A line that is not JSON is logged and skipped; a stream that breaks off
fails the run with an error naming the endpoint, keeping what was produced.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from agents.media import only, refused_media
from agents.peer_events.copilotkit import runtime_event_line
from agents.peer_events.langgraph import LangGraphEventMapper
from agents.peer_http import TIMEOUT_CODE, PeerCallContext, PeerError, peer_stream
from agents.registry import AgentSpec
from agents.remote.config import RemoteEndpoint, remote_endpoint_get
from agents.remote.messages import runtime_messages
from agents.runners.context import TurnContext
from agents.runners.stream import AgentStream, normalized_events
from copilot_runtime.engine.actions import ServerAction
from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.events import Event, RunError
from copilot_runtime.events.request import TurnRequest

logger = logging.getLogger(__name__)

STREAM_INTERRUPTED_CODE = "AGENT_STREAM_INTERRUPTED"
_LINE_EXCERPT = 200


def remote_agent_target(spec: AgentSpec) -> tuple[RemoteEndpoint, str]:
    """The endpoint serving the agent, and the agent's name there."""
    endpoint_name = spec.options.get("endpoint")
    if not isinstance(endpoint_name, str) or not endpoint_name:
        raise CopilotKitError(
            f"Agent '{spec.name}' (kind 'remote') needs an 'endpoint': the name of one of "
            "COPILOT_RUNTIME['REMOTE_ENDPOINTS'].",
            code=ErrorCode.CONFIGURATION_ERROR,
        )
    return remote_endpoint_get(endpoint_name), str(spec.options.get("agent") or spec.name)


def agent_config(request: TurnRequest, agent_name: str) -> dict[str, Any]:
    """The ``config`` the client sent with the agent's state (``agentStates``)."""
    for entry in request.agent_states:
        if entry.get("agentName") == agent_name and entry.get("config"):
            try:
                config = orjson.loads(entry["config"])
            except (orjson.JSONDecodeError, TypeError):
                return {}
            return config if isinstance(config, dict) else {}
    return {}


def offered_actions(
    request: TurnRequest, server_actions: dict[str, ServerAction]
) -> list[dict[str, Any]]:
    """The actions the agent may call: the server actions, then every frontend action."""
    actions = [
        {"name": a.name, "description": a.description, "parameters": a.parameters}
        for a in server_actions.values()
    ]
    for action in request.actions:
        if action.name in server_actions:
            continue
        actions.append(
            {
                "name": action.name,
                "description": action.description,
                "parameters": action.parameters or {"type": "object", "properties": {}},
            }
        )
    return actions


async def _execute_body(spec: AgentSpec, remote_name: str, turn: TurnContext) -> dict[str, Any]:
    request = turn.request
    body: dict[str, Any] = {
        "name": remote_name,
        "threadId": turn.thread_id,
        "messages": runtime_messages(request.messages),
        "state": dict(request.state),
        "config": agent_config(request, spec.name),
        "properties": dict(request.properties),
        "actions": offered_actions(request, await turn.server_actions()),
    }
    node_name = (request.agent_session or {}).get("nodeName")
    if node_name:
        body["nodeName"] = node_name
    answer = await turn.interrupt_answer()
    if answer is not None:
        body["metaEvents"] = [
            {"name": answer.name, "value": answer.value, "response": answer.response}
        ]
    return body


async def json_line_events(
    endpoint: RemoteEndpoint, *, path: str, body: dict[str, Any], context: PeerCallContext
) -> AsyncIterator[Event]:
    """The events of a JSON-lines agent stream, in either format; failures as a RunError."""
    peer = endpoint.peer
    mapper = LangGraphEventMapper()
    try:
        async with peer_stream(peer, path=path, body=body, context=context) as response:
            async for raw in response.aiter_lines():
                if not raw.strip():
                    continue
                try:
                    line = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    logger.warning(
                        "%s sent a line that is not JSON; skipped: %r",
                        peer.label,
                        raw[:_LINE_EXCERPT],
                    )
                    continue
                if not isinstance(line, dict):
                    continue
                events = mapper.feed(line) if "event" in line else runtime_event_line(line)
                for event in events:
                    yield event
    except PeerError as exc:
        yield RunError(message=exc.message, code=exc.run_code, details=exc.details())
    except httpx.TimeoutException:
        yield RunError(
            message=f"The {peer.label} stopped sending the agent's events (read timeout).",
            code=TIMEOUT_CODE,
            details={"peer": peer.name, "url": peer.url},
        )
    except httpx.TransportError as exc:
        yield RunError(
            message=f"The {peer.label} broke off the agent's stream: "
            f"{str(exc) or type(exc).__name__}",
            code=STREAM_INTERRUPTED_CODE,
            details={"peer": peer.name, "url": peer.url},
        )


async def remote_agent_events(spec: AgentSpec, turn: TurnContext) -> AsyncIterator[Event]:
    endpoint, remote_name = remote_agent_target(spec)
    refused = refused_media(
        messages=turn.request.messages,
        carried=frozenset({"image"}),
        agent_name=spec.name,
        label="a remote endpoint agent",
    )
    body = await _execute_body(spec, remote_name, turn) if refused is None else {}
    context = PeerCallContext(
        peer_name=endpoint.name,
        url=endpoint.peer.url_for("agents/execute"),
        properties=turn.request.properties,
        thread_id=turn.thread_id,
        agent_name=spec.name,
    )
    stream = AgentStream(
        thread_id=turn.thread_id,
        agent_name=spec.name,
        server_actions=await turn.server_actions(),
        before_server_action=turn.before_server_action,
    )
    source = (
        json_line_events(endpoint, path="agents/execute", body=body, context=context)
        if refused is None
        else only(refused)
    )
    async for event in normalized_events(source, stream):
        yield event
