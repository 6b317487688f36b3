"""A model's reasoning through the real v2 client (OpenAI-compatible path): streamed as the
REASONING_* events the TypeScript runtime 1.75 sends, closed before the answer, kept by the
client as a ``reasoning`` message that is not sent back to the model, and rebuilt by a new
client's ``connect``."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Message
from tests.e2e.agui_client import run_agui, step_types
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import generate_command, generate_data, server_env, text_input

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

REASONING = "The user greets me, so I greet back."


@pytest.fixture
def server(shared_live_server_factory: Any, fake_upstream: FakeUpstream) -> ServedProcess:
    return shared_live_server_factory(env=server_env(fake_upstream.base_url))


def _command(server: ServedProcess, thread_id: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {
        "runtimeUrl": f"{server.url}/api/copilotkit",
        "agentId": "default",
        "threadId": thread_id,
        "steps": list(steps),
    }


def _run(content: str, message_id: str) -> dict[str, Any]:
    return {"op": "run", "message": {"id": message_id, "content": content}}


def _fake(directive: dict[str, Any]) -> str:
    return "FAKE: " + json.dumps(directive)


def test_reasoning_streams_before_the_answer_stays_out_of_the_model_and_is_replayed(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    thread_id = f"reasoning-{uuid.uuid4()}"
    result = run_agui(
        _command(
            server,
            thread_id,
            _run(_fake({"reasoning": REASONING, "text": "Hello!"}), "u1"),
            _run(_fake({"text": "Again."}), "u2"),
        )
    )

    assert result["errors"] == []
    first, second = result["steps"]
    types = [kind for kind in step_types(first) if kind != "REASONING_MESSAGE_CONTENT"]
    assert types == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        *(["TEXT_MESSAGE_CONTENT"] * types.count("TEXT_MESSAGE_CONTENT")),
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    [reasoning] = [m for m in result["messages"] if m["role"] == "reasoning"]
    assert reasoning["content"] == REASONING
    assert [m["content"] for m in result["messages"] if m["role"] == "assistant"] == [
        "Hello!",
        "Again.",
    ]
    # The client sent its reasoning message back with the second run: the model never sees it.
    assert step_types(second)[-1] == "RUN_FINISHED"
    sent = fake_upstream.requests()[-1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == "Hello!"

    replayed = run_agui(_command(server, thread_id, {"op": "connect"}))
    assert replayed["errors"] == []
    [again] = [m for m in replayed["messages"] if m["role"] == "reasoning"]
    assert again == reasoning
    order = [m["role"] for m in replayed["messages"]]
    assert order == ["user", "reasoning", "assistant", "user", "assistant"]

    # Stored in the thread, before the answer, and still current after a run whose history
    # carried it back (the client's copy is not stored a second time).
    assert _stored(thread_id) == [
        ("text", "user", False),
        ("reasoning", REASONING, False),
        ("text", "Hello!", False),
        ("text", "user", False),
        ("text", "Again.", False),
    ]


def _stored(thread_id: str) -> list[tuple[str, str, bool]]:
    rows = Message.objects.filter(thread__thread_id=thread_id).order_by("position")
    return [
        (row.kind, row.content if row.role != "user" else "user", row.superseded) for row in rows
    ]


@pytest.fixture
def anthropic_server(shared_live_server_factory: Any, fake_upstream: FakeUpstream) -> ServedProcess:
    adapter = {
        "kind": "anthropic",
        "api_key": "test",
        "base_url": fake_upstream.base_url.removesuffix("/v1"),
        "max_retries": 0,
        "max_tokens": 2048,
        "thinking_budget": 1024,
    }
    return shared_live_server_factory(
        env=server_env(fake_upstream.base_url, COPILOT_RUNTIME_ADAPTER=json.dumps(adapter))
    )


def test_anthropic_signed_thinking_reaches_the_client_and_goes_back_with_the_next_run(
    anthropic_server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    thread_id = f"thinking-{uuid.uuid4()}"
    result = run_agui(
        _command(
            anthropic_server,
            thread_id,
            _run(_fake({"reasoning": REASONING, "redacted_thinking": "ENC", "text": "Hi!"}), "u1"),
            _run(_fake({"text": "Again."}), "u2"),
        )
    )

    assert result["errors"] == []
    first, second = result["steps"]
    assert step_types(first).count("REASONING_ENCRYPTED_VALUE") == 2
    thought, redacted = [m for m in result["messages"] if m["role"] == "reasoning"]
    assert thought["content"] == REASONING and thought["encryptedValue"]
    assert redacted["content"] == "" and redacted["encryptedValue"]
    # The fake refuses a thinking block whose signature does not match its text (400).
    assert step_types(second)[-1] == "RUN_FINISHED"
    sent = fake_upstream.requests()[-1]
    assert sent["thinking"]["type"] == "enabled"
    assistant = next(m for m in sent["messages"] if m["role"] == "assistant")
    assert [block["type"] for block in assistant["content"]] == [
        "thinking",
        "redacted_thinking",
        "text",
    ]
    assert assistant["content"][0]["thinking"] == REASONING
    assert assistant["content"][1]["data"] == "ENC"

    replayed = run_agui(_command(anthropic_server, thread_id, {"op": "connect"}))
    assert [m for m in replayed["messages"] if m["role"] == "reasoning"] == [thought, redacted]
    stored = Message.objects.filter(thread__thread_id=thread_id, kind="reasoning")
    assert [(row.content, row.arguments) for row in stored.order_by("position")] == [
        (REASONING, {"encryptedValue": thought["encryptedValue"]}),
        ("", {"encryptedValue": redacted["encryptedValue"]}),
    ]


@pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)
def test_a_v1_client_gets_the_answer_alone(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script({"reasoning": REASONING, "text": "Hello!"})
    data = generate_data(
        thread_id=f"reasoning-v1-{uuid.uuid4()}", messages=[text_input("u1", "Hi")]
    )
    result = run_js(version, generate_command(server.url, data))

    assert result["errors"] == []
    final = result["final"]
    assert final["status"]["code"] == "Success"
    [message] = final["messages"]
    assert message["__typename"] == "TextMessageOutput"
    assert "".join(message["content"]) == "Hello!"
    (converted,) = result["messages"]
    assert (converted["type"], converted["content"]) == ("TextMessage", "Hello!")
    assert REASONING not in json.dumps(result)
