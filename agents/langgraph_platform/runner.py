"""Running a LangGraph Platform agent (kind ``langgraph``, configuration in config.py).

A turn is one LangGraph run on the deployment's thread for this conversation: the LangGraph
thread id is derived from our thread (its id and primary key: client thread ids are per owner)
and the agent, and recorded in our thread's metadata (``langgraph``), where a reload, another
process or a worker find it again (and the admin shows it).
The run's input is the messages the LangGraph thread does not have yet (by id: its own
replies keep the ids it streamed them with), the client's state and the frontend actions
(``copilotkit.actions``, as CopilotKit's LangGraph integrations read them); an answer to the
thread's interrupt resumes it instead (``Command(resume=...)``). Failures of the deployment
fail the run with an error naming it, keeping what was produced.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson

from agents.langgraph_platform.client import deployment_client
from agents.langgraph_platform.config import Deployment, langgraph_target
from agents.langgraph_platform.events import AGENT_ERROR_CODE, LangGraphRunMapper
from agents.langgraph_platform.messages import langgraph_messages
from agents.media import only, refused_media
from agents.registry import AgentSpec
from agents.runners.context import TurnContext
from agents.runners.stream import AgentStream, normalized_events
from conversations.store.health import db_sync_to_async
from copilot_runtime.events import Event, RunError

logger = logging.getLogger(__name__)

# ``events`` streams text and tool calls, ``updates`` interrupts and tool results, ``values``
# the state: the modes the TypeScript runtime's LangGraph Platform agents read.
STREAM_MODES = ["events", "updates", "values"]
METADATA_KEY = "langgraph"
_THREAD_NAMESPACE = uuid.UUID("0b8f3c2e-5d7a-4e61-9f3b-6a2c1d4e8f90")
UNREACHABLE_CODE = "AGENT_ENDPOINT_UNREACHABLE"


def langgraph_thread_id(
    *, thread_id: str, thread_pk: int, agent_name: str, deployment: Deployment
) -> str:
    # With our thread's primary key: two owners' threads of one client id are two
    # conversations, and must not continue one LangGraph thread.
    name = f"{deployment.url}\n{agent_name}\n{thread_id}\n{thread_pk}"
    return str(uuid.uuid5(_THREAD_NAMESPACE, name))


def _resume_value(response: Any) -> Any:
    """The client's answer as the graph gets it: JSON when it is JSON, else the text."""
    if isinstance(response, str):
        try:
            return orjson.loads(response)
        except orjson.JSONDecodeError:
            return response
    return response


async def _run_input(
    client: Any, lg_thread_id: str, turn: TurnContext
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any]]:
    """(input, command, the thread's state values) for this turn."""
    thread_state = await client.threads.get_state(lg_thread_id)
    values = thread_state.get("values") if isinstance(thread_state, dict) else None
    values = values if isinstance(values, dict) else {}
    answer = await turn.interrupt_answer()
    if answer is not None and thread_state.get("next"):
        return None, {"resume": _resume_value(answer.response)}, values
    known = {m.get("id") for m in values.get("messages") or [] if isinstance(m, dict)}
    request = turn.request
    new_messages = [m for m in langgraph_messages(request.messages) if m["id"] not in known]
    run_input: dict[str, Any] = {**request.state, "messages": new_messages}
    run_input["copilotkit"] = {
        "actions": [
            {
                "type": "function",
                "function": {
                    "name": action.name,
                    "description": action.description,
                    "parameters": action.parameters or {"type": "object", "properties": {}},
                },
            }
            for action in request.actions
            if action.available != "remote"
        ],
        "context": [
            {"description": description, "value": value} for description, value in request.context
        ],
    }
    return run_input, None, values


async def _stream(
    spec: AgentSpec, deployment: Deployment, assistant: str, turn: TurnContext
) -> AsyncIterator[Event]:
    thread_id = turn.thread_id
    try:
        lg_thread_id = await _langgraph_thread(turn, spec.name, deployment)
        client = deployment_client(deployment)
        await client.threads.create(thread_id=lg_thread_id, if_exists="do_nothing")
        run_input, command, values = await _run_input(client, lg_thread_id, turn)
        mapper = LangGraphRunMapper(thread_id=thread_id, agent_name=spec.name, state=values)
        async for part in client.runs.stream(
            lg_thread_id,
            assistant,
            input=run_input,
            command=command,
            stream_mode=STREAM_MODES,
        ):
            for event in mapper.feed(str(part.event), part.data):
                yield event
    except Exception as exc:  # the SDK's HTTP errors, a refused connection, a cut stream
        logger.warning("LangGraph agent %r failed on %s: %s", spec.name, deployment.url, exc)
        status = getattr(getattr(exc, "response", None), "status_code", None)
        yield RunError(
            message=f"The {deployment.label} failed for agent '{spec.name}': "
            f"{type(exc).__name__}: {exc}"[:500],
            code=AGENT_ERROR_CODE if status else UNREACHABLE_CODE,
            details={"agent": spec.name, "url": deployment.url, "statusCode": status},
        )


async def _langgraph_thread(turn: TurnContext, agent_name: str, deployment: Deployment) -> str:
    """The LangGraph thread of our thread and this agent on ``deployment``: the one recorded
    in our thread's metadata (threads recorded before ids were per owner keep theirs), else a
    new one derived and recorded."""
    from conversations.services.threads import thread_metadata_set, thread_metadata_setdefault

    thread_pk = turn.request.thread_pk
    if thread_pk is None:
        # No stored thread (a suggestion): nothing tells whose conversation the client's id
        # names, so the run gets a LangGraph thread of its own.
        return str(uuid.uuid4())
    key = f"{METADATA_KEY}:{agent_name}"
    derived = {
        "thread_id": langgraph_thread_id(
            thread_id=turn.thread_id,
            thread_pk=thread_pk,
            agent_name=agent_name,
            deployment=deployment,
        ),
        "url": deployment.url,
    }
    recorded = await db_sync_to_async(thread_metadata_setdefault)(
        thread_pk=thread_pk, key=key, value=derived
    )
    if isinstance(recorded, dict) and recorded.get("url") == deployment.url:
        lg_thread_id = recorded.get("thread_id")
        if isinstance(lg_thread_id, str) and lg_thread_id:
            return lg_thread_id
    # Recorded for another deployment (its URL changed): this one's thread from now on.
    await db_sync_to_async(thread_metadata_set)(thread_pk=thread_pk, key=key, value=derived)
    return derived["thread_id"]


async def langgraph_agent_events(spec: AgentSpec, turn: TurnContext) -> AsyncIterator[Event]:
    deployment, assistant = langgraph_target(spec)
    stream = AgentStream(
        thread_id=turn.thread_id,
        agent_name=spec.name,
        before_server_action=turn.before_server_action,
    )
    refused = refused_media(
        messages=turn.request.messages,
        carried=frozenset(),
        agent_name=spec.name,
        label="a LangGraph Platform agent",
    )
    source = _stream(spec, deployment, assistant, turn) if refused is None else only(refused)
    async for event in normalized_events(source, stream):
        yield event
