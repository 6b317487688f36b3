"""Running an AG-UI agent (kind ``agui``)::

    "AGENTS": {
        "planner": {
            "kind": "agui",
            "url": "http://127.0.0.1:8123/agent",     # the agent's POST endpoint
            "headers": {"Authorization": "Bearer ..."},  # or a dotted path to a hook
            "timeout_seconds": 120,                     # longest silence while reading
            "forwarded_props": {"streamSubgraphs": True},  # merged into forwardedProps
        },
    }

``POST`` the ``RunAgentInput`` (``Accept: text/event-stream``) and read the SSE events back,
mapped as agents/agui_client/events.py says. Failures (down, timeout, a broken stream, an
event that is not JSON) fail the run with an error naming the agent, keeping what was
produced.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import orjson

from agents.agui_client.events import AguiEventMapper
from agents.agui_client.run_input import run_agent_input
from agents.agui_client.sse import sse_data
from agents.peer_http import TIMEOUT_CODE, Peer, PeerCallContext, PeerError, peer_stream
from agents.registry import AgentSpec
from agents.remote.runner import STREAM_INTERRUPTED_CODE
from agents.runners.context import TurnContext
from agents.runners.stream import AgentStream, normalized_events
from copilot_runtime.errors import CopilotKitError, ErrorCode
from copilot_runtime.events import Event, RunError

logger = logging.getLogger(__name__)

AGUI_AGENT_KIND = "AG-UI agent"
BAD_EVENT_CODE = "AGENT_BAD_EVENT"
_EXCERPT = 200


def agui_peer(spec: AgentSpec) -> Peer:
    url = spec.options.get("url")
    if not isinstance(url, str) or not url:
        raise CopilotKitError(
            f"Agent '{spec.name}' (kind 'agui') needs a 'url': the agent's POST endpoint.",
            code=ErrorCode.CONFIGURATION_ERROR,
        )
    timeout = spec.options.get("timeout_seconds")
    return Peer(
        kind=AGUI_AGENT_KIND,
        name=spec.name,
        url=url,
        headers=spec.options.get("headers"),
        timeout_seconds=float(timeout) if timeout else None,
    )


async def _sse_events(
    peer: Peer, body: dict[str, object], context: PeerCallContext, mapper: AguiEventMapper
) -> AsyncIterator[Event]:
    try:
        async with peer_stream(
            peer, path="", body=body, context=context, accept="text/event-stream"
        ) as response:
            async for data in sse_data(response.aiter_lines()):
                try:
                    event = orjson.loads(data)
                except orjson.JSONDecodeError:
                    yield RunError(
                        message=f"The {peer.label} sent an event that is not JSON: "
                        f"{data[:_EXCERPT]!r}",
                        code=BAD_EVENT_CODE,
                        details={"peer": peer.name, "url": peer.url},
                    )
                    return
                if isinstance(event, dict):
                    for mapped in mapper.feed(event):
                        yield mapped
    except PeerError as exc:
        yield RunError(message=exc.message, code=exc.run_code, details=exc.details())
    except httpx.TimeoutException:
        yield RunError(
            message=f"The {peer.label} stopped sending events (read timeout).",
            code=TIMEOUT_CODE,
            details={"peer": peer.name, "url": peer.url},
        )
    except httpx.TransportError as exc:
        yield RunError(
            message=f"The {peer.label} broke off its event stream: "
            f"{str(exc) or type(exc).__name__}",
            code=STREAM_INTERRUPTED_CODE,
            details={"peer": peer.name, "url": peer.url},
        )


async def agui_agent_events(spec: AgentSpec, turn: TurnContext) -> AsyncIterator[Event]:
    peer = agui_peer(spec)
    request = turn.request
    server_actions = await turn.server_actions()
    extra = spec.options.get("forwarded_props")
    body = run_agent_input(
        request=request,
        agent_name=spec.name,
        server_actions=server_actions,
        answer=await turn.interrupt_answer(),
        extra_forwarded_props=extra if isinstance(extra, dict) else None,
    )
    context = PeerCallContext(
        peer_name=peer.name,
        url=peer.url,
        properties=request.properties,
        thread_id=turn.thread_id,
        agent_name=spec.name,
        forwarded_headers=request.forwarded_headers,
    )
    mapper = AguiEventMapper(
        thread_id=turn.thread_id, agent_name=spec.name, state=dict(request.state)
    )
    stream = AgentStream(
        thread_id=turn.thread_id,
        agent_name=spec.name,
        server_actions=server_actions,
        before_server_action=turn.before_server_action,
    )
    async for event in normalized_events(_sse_events(peer, body, context, mapper), stream):
        yield event
