"""The request's JSON form, stored on a run and carried by its Celery task."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import orjson

from copilot_runtime.events.request import (
    ForwardedParameters,
    FrontendAction,
    InputMessage,
    TurnRequest,
    turn_request_from_payload,
    turn_request_to_payload,
)

CREATED = dt.datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)


def every_field_set() -> TurnRequest:
    return TurnRequest(
        thread_id="t1",
        messages=[
            InputMessage(id="m1", kind="text", created_at=CREATED, role="user", content="hi"),
            InputMessage(
                id="m2",
                kind="action_execution",
                action_name="lookup",
                arguments={"city": "Oslo", "days": [1, 2]},
                parent_message_id="m1",
            ),
            InputMessage(id="m3", kind="result", action_execution_id="m2", result="sunny"),
            InputMessage(id="m4", kind="image", image_format="png", image_bytes="aGk="),
            InputMessage(id="m5", kind="agent_state", agent_state={"step": 2}),
        ],
        actions=[FrontendAction(name="lookup", description="d", parameters={"type": "object"})],
        context=[("the user", "likes weather")],
        forwarded=ForwardedParameters(model="m", max_tokens=10, stop=["\n"], temperature=0.5),
        request_type="Chat",
        previous_run_id="r0",
        agent_name="weather",
        agent_session={"agentName": "weather"},
        agent_states=[{"agentName": "weather", "state": "{}"}],
        meta_events=[{"name": "LangGraphInterruptEvent"}],
        extensions={"openaiAssistantAPI": {"threadId": "x"}},
        properties={"tenant": "a"},
        frontend_url="http://localhost:3000/",
        cloud={"guardrails": None},
        cloud_public_api_key="ck_pub",
        state={"count": 1},
        forwarded_headers={"authorization": "Bearer x"},
    )


def generic_payload(request: TurnRequest) -> dict[str, Any]:
    """The same form, made the generic (and slower) way: every dataclass field, recursively."""
    payload = dataclasses.asdict(request)
    local = [f.name for f in dataclasses.fields(InputMessage) if f.metadata.get("local")]
    for message in payload["messages"]:
        created = message["created_at"]
        message["created_at"] = created.isoformat() if created else None
        for name in local:  # this process's own notes on the message (InputMessage.checked)
            del message[name]
    payload["context"] = [list(entry) for entry in request.context]
    return payload


def test_the_payload_holds_every_field_as_the_generic_form_does() -> None:
    request = every_field_set()

    assert turn_request_to_payload(request) == generic_payload(request)


def test_a_request_survives_the_json_round_trip_a_worker_makes() -> None:
    request = every_field_set()

    carried = orjson.loads(orjson.dumps(turn_request_to_payload(request)))

    assert turn_request_from_payload(carried) == request


def test_a_request_without_optional_parts_survives_it_too() -> None:
    request = TurnRequest(thread_id=None, messages=[InputMessage(id="m1", kind="text")])

    carried = orjson.loads(orjson.dumps(turn_request_to_payload(request)))

    assert turn_request_from_payload(carried) == request
