"""A real CopilotKit remote endpoint (PyPI ``copilotkit``, ``CopilotKitRemoteEndpoint`` under
FastAPI) for tests, with remote actions and an agent written on the SDK's ``Agent`` class.

Actions: ``remoteGreet(name)`` answers a greeting; ``remoteFail()`` raises. The agent
``scripted`` streams runtime-event lines (``copilotkit.protocol``): an interrupt when the last
user message says "interrupt", the answer back when the request carries one in its
``metaEvents``, otherwise an echo; each run sends a state message counting its turns.
``ScriptedAgent.received`` keeps what each execute request carried, for assertions.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from copilotkit import Action, Agent, CopilotKitRemoteEndpoint
from copilotkit.integrations.fastapi import add_fastapi_endpoint
from copilotkit.protocol import (
    RuntimeMetaEventName,
    agent_state_message,
    emit_runtime_events,
    meta_event,
    text_message_content,
    text_message_end,
    text_message_start,
)
from fastapi import FastAPI

ENDPOINT_PREFIX = "/copilotkit"
INTERRUPT_WORD = "interrupt"
REMOTE_FAILURE = "the remote action failed on purpose"


def greet(name: str) -> dict[str, str]:
    return {"greeting": f"Hello, {name}!"}


def fail() -> None:
    raise RuntimeError(REMOTE_FAILURE)


class ScriptedAgent(Agent):
    received: ClassVar[list[dict[str, Any]]] = []

    def execute(  # type: ignore[override]
        self,
        *,
        state: dict,
        config: dict | None = None,
        messages: list,
        thread_id: str,
        actions: list | None = None,
        meta_events: list | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[str]:
        self.received.append(
            {
                "state": state,
                "config": config,
                "messages": messages,
                "thread_id": thread_id,
                "actions": actions,
                "meta_events": meta_events,
                "node_name": kwargs.get("node_name"),
            }
        )
        return self._events(state=state, messages=messages, thread_id=thread_id, meta=meta_events)

    async def _events(
        self, *, state: dict, messages: list, thread_id: str, meta: list | None
    ) -> AsyncIterator[str]:
        turns = int(state.get("turns") or 0) + 1
        last = next(
            (m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), ""
        )
        answer = next((m.get("response") for m in meta or [] if m.get("response")), None)
        new_state = {**state, "turns": turns}
        if answer is not None:
            new_state["answer"] = answer
        yield emit_runtime_events(
            agent_state_message(
                thread_id=thread_id,
                agent_name=self.name,
                node_name="scripted",
                run_id="remote-run",
                active=True,
                role="assistant",
                state=json.dumps(new_state),
                running=True,
            )
        )
        if answer is None and INTERRUPT_WORD in last:
            yield emit_runtime_events(
                meta_event(
                    name=RuntimeMetaEventName.LANG_GRAPH_INTERRUPT_EVENT,
                    value=json.dumps({"question": "Proceed?"}),
                )
            )
            return
        text = f"You answered: {answer}" if answer is not None else f"Echo: {last}"
        message_id = f"remote-{uuid.uuid4()}"
        yield emit_runtime_events(
            text_message_start(message_id=message_id),
            text_message_content(message_id=message_id, content=text[:6]),
            text_message_content(message_id=message_id, content=text[6:]),
            text_message_end(message_id=message_id),
        )

    async def get_state(self, *, thread_id: str) -> dict[str, Any]:  # type: ignore[override]
        return {
            "threadId": thread_id,
            "threadExists": True,
            "state": {"from": "remote"},
            "messages": [],
        }


def copilotkit_sdk_app() -> FastAPI:
    app = FastAPI()
    sdk = CopilotKitRemoteEndpoint(
        actions=[
            Action(
                name="remoteGreet",
                description="Greets someone, remotely.",
                parameters=[{"name": "name", "type": "string", "description": "Who"}],
                handler=greet,
            ),
            Action(name="remoteFail", description="Always fails.", handler=fail),
        ],
        agents=[ScriptedAgent(name="scripted", description="Echoes, asks, remembers")],
    )
    add_fastapi_endpoint(app, sdk, ENDPOINT_PREFIX)
    return app
