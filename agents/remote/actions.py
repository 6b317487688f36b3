"""Remote endpoints' actions, offered to the chat engine (and agents) as server actions.

Each action an endpoint lists in ``/info`` becomes a ``ServerAction`` whose handler calls
``POST {url}/actions/execute``; a failure (the action raised, the endpoint is down) comes back
to the model as the action's error result, naming the endpoint. A configured server action of
the same name wins over a remote one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from agents.peer_http import PeerCallContext, peer_post_json
from agents.remote.config import RemoteEndpoint, remote_endpoints
from agents.remote.discovery import remote_info
from copilot_runtime.engine.actions import ServerAction, server_actions_from_settings
from copilot_runtime.events.request import TurnRequest

logger = logging.getLogger(__name__)

_SCALAR_TYPES = {"string": "string", "number": "number", "boolean": "boolean"}


def _parameter_schema(parameter: dict[str, Any]) -> dict[str, Any]:
    """One CopilotKit parameter (``{name, type, description, enum?, attributes?}``)."""
    raw_type = str(parameter.get("type") or "string")
    is_array = raw_type.endswith("[]")
    base = raw_type[:-2] if is_array else raw_type
    schema: dict[str, Any]
    if base == "object":
        schema = json_schema_from_parameters(parameter.get("attributes") or [])
    else:
        schema = {"type": _SCALAR_TYPES.get(base, "string")}
        if parameter.get("enum"):
            schema["enum"] = list(parameter["enum"])
    if parameter.get("description"):
        schema["description"] = str(parameter["description"])
    if is_array:
        schema = {"type": "array", "items": schema}
        if parameter.get("description"):
            schema["description"] = str(parameter["description"])
    return schema


def json_schema_from_parameters(parameters: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of a CopilotKit parameter list (required unless ``required`` is False)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in parameters:
        if not isinstance(parameter, dict) or not parameter.get("name"):
            continue
        name = str(parameter["name"])
        properties[name] = _parameter_schema(parameter)
        if parameter.get("required", True) is not False:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def remote_action(
    endpoint: RemoteEndpoint, spec: dict[str, Any], *, request: TurnRequest
) -> ServerAction:
    name = str(spec["name"])
    properties = dict(request.properties)

    async def execute(**arguments: Any) -> Any:
        context = PeerCallContext(
            peer_name=endpoint.name,
            url=endpoint.peer.url_for("actions/execute"),
            properties=properties,
            thread_id=request.thread_id,
            agent_name=request.agent_name,
        )
        answer = await peer_post_json(
            endpoint.peer,
            path="actions/execute",
            body={"name": name, "arguments": arguments, "properties": properties},
            context=context,
        )
        if isinstance(answer, dict) and "result" in answer:
            return answer["result"]
        return answer

    execute.__name__ = name
    return ServerAction(
        name=name,
        description=str(spec.get("description") or ""),
        parameters=json_schema_from_parameters(spec.get("parameters") or []),
        handler=execute,
    )


async def remote_server_actions(request: TurnRequest) -> dict[str, ServerAction]:
    """The actions of every endpoint that offers them (discovered concurrently). An endpoint
    that cannot be reached fails the turn with an error naming it (``PeerError``)."""
    endpoints = [endpoint for endpoint in remote_endpoints() if endpoint.offer_actions]
    if not endpoints:
        return {}
    infos = await asyncio.gather(
        *(
            remote_info(
                endpoint,
                properties=dict(request.properties),
                frontend_url=request.frontend_url,
                thread_id=request.thread_id,
            )
            for endpoint in endpoints
        )
    )
    actions: dict[str, ServerAction] = {}
    for endpoint, info in zip(endpoints, infos, strict=True):
        for spec in info.actions:
            if spec["name"] in actions:
                logger.warning(
                    "remote action %r of %s shadows another endpoint's; keeping the first",
                    spec["name"],
                    endpoint.peer.label,
                )
                continue
            actions[spec["name"]] = remote_action(endpoint, spec, request=request)
    return actions


async def turn_server_actions(request: TurnRequest) -> dict[str, ServerAction]:
    """The server actions a turn offers: the configured ones, then the remote endpoints'."""
    configured = server_actions_from_settings()
    remote = await remote_server_actions(request)
    return {**configured, **{k: v for k, v in remote.items() if k not in configured}}
