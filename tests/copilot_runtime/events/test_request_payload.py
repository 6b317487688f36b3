"""The request's JSON forms: the payload stored on a run, and the text its Celery task carries."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import orjson
import pytest

from copilot_runtime.events import request as request_module
from copilot_runtime.events.request import (
    ForwardedParameters,
    FrontendAction,
    InputMessage,
    TurnRequest,
    message_for_hooks,
    turn_request_from_json,
    turn_request_from_payload,
    turn_request_to_json,
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
        thread_pk=7,
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
    # This process's own notes on the request (TurnRequest.thread_pk: the worker takes it
    # from the task's placement).
    for field in dataclasses.fields(TurnRequest):
        if field.metadata.get("local"):
            del payload[field.name]
    return payload


def test_the_payload_holds_every_field_as_the_generic_form_does() -> None:
    request = every_field_set()

    assert turn_request_to_payload(request) == generic_payload(request)
    assert "thread_pk" not in turn_request_to_payload(request)


def test_a_request_survives_the_json_round_trip_a_worker_makes() -> None:
    request = every_field_set()

    carried = orjson.loads(orjson.dumps(turn_request_to_payload(request)))

    assert turn_request_from_payload(carried) == request


def test_a_request_without_optional_parts_survives_it_too() -> None:
    request = TurnRequest(thread_id=None, messages=[InputMessage(id="m1", kind="text")])

    carried = orjson.loads(orjson.dumps(turn_request_to_payload(request)))

    assert turn_request_from_payload(carried) == request


def test_the_tasks_text_holds_what_the_payload_holds() -> None:
    request = every_field_set()

    text = turn_request_to_json(request)

    assert orjson.loads(text) == orjson.loads(orjson.dumps(turn_request_to_payload(request)))
    assert turn_request_from_json(text) == request


def test_the_tasks_text_begins_with_the_messages() -> None:
    text = turn_request_to_json(every_field_set())

    assert text.startswith('{"messages":[')
    assert next(iter(orjson.loads(text))) == "messages"


def test_a_message_object_is_written_once_however_many_turns_re_send_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    written: list[str] = []
    write = request_module._message_payload

    def counting(message: InputMessage) -> dict[str, Any]:
        written.append(message.id)
        return write(message)

    monkeypatch.setattr(request_module, "_message_payload", counting)
    first = every_field_set()
    new = InputMessage(id="m6", kind="text", role="user", content="and tomorrow?")
    # The next turn re-sends the same message objects (remembered by the web), and a new one.
    second = dataclasses.replace(first, messages=[*first.messages, new])

    first_text = turn_request_to_json(first)
    second_text = turn_request_to_json(second)

    assert written == ["m1", "m2", "m3", "m4", "m5", "m6"]
    assert turn_request_from_json(first_text) == first
    assert turn_request_from_json(second_text) == second


def test_a_message_given_its_id_after_it_was_written_is_written_again() -> None:
    # A client may send a message without an id; storing its turn gives it one.
    message = InputMessage(id="", kind="text", role="user", content="hi")
    request = TurnRequest(thread_id="t1", messages=[message])
    turn_request_to_json(request)

    message.id = "ck-minted"

    assert turn_request_from_json(turn_request_to_json(request)).messages[0].id == "ck-minted"


def test_a_messages_written_form_is_no_part_of_it() -> None:
    request = every_field_set()
    turn_request_to_json(request)

    assert request == every_field_set()
    assert "json_form" not in turn_request_to_payload(request)["messages"][0]
    assert "json_form" not in orjson.loads(turn_request_to_json(request))["messages"][0]


def test_a_value_orjson_cannot_write_is_refused_for_the_payload_form_to_carry() -> None:
    request = every_field_set()
    request.state = {"count": 2**70}  # put there by a hook: no parsed request holds one

    with pytest.raises(TypeError):
        turn_request_to_json(request)


def test_the_hooks_see_a_messages_fields_without_this_processs_notes_on_it() -> None:
    request = every_field_set()
    turn_request_to_json(request)  # what a celery turn does before its hook is called
    message = request.messages[1]
    expected = dataclasses.asdict(message)
    del expected["checked"], expected["json_form"]

    seen = message_for_hooks(message)

    assert seen == expected
    # A copy: a hook that changes it leaves the message (shared by later turns) alone.
    seen["arguments"]["city"] = "Bergen"
    assert message.arguments == {"city": "Oslo", "days": [1, 2]}
