"""``generateCopilotResponse`` end to end: the real CopilotKit client against our served process.

Each test starts daphne on the pytest-django test database with the fake OpenAI upstream,
drives it with ``@copilotkit/runtime-client-gql`` (both pinned versions) through
``tests/e2e/js/gql_client.cjs``, and then checks what the server stored.

This module: text replies (short, long, unicode, multi-turn, concurrent) and thread ids.
The rest of the suite: test_generate_actions (server, failing and frontend actions, tool
loops), test_generate_errors (upstream failures, busy threads, 406, malformed requests),
test_generate_abort (client stops), test_generate_history (regenerate, loadAgentState),
test_generate_parameters (forwarded parameters, request types, request hooks) and
test_generate_fast_path (the real clients' document and the dedicated encoder).
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Run, RunStatus, Thread
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.generate_e2e import (
    deterministic_tokens,
    finished_run,
    generate_command,
    generate_data,
    joined_content,
    prompt_words,
    replayed_text,
    run_events,
    text_input,
    thread_rows,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

versions = pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)

LONG_REPLY_TOKENS = 2000


def only_message(result: dict[str, Any]) -> dict[str, Any]:
    messages = result["final"]["messages"]
    assert len(messages) == 1, messages
    return messages[0]


@versions
def test_text_reply_streams_and_is_stored(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    # Paced as a model streams (20 ms a word): a read, so a chunk, per word. Words that reach
    # the runtime in one read go out as one chunk.
    fake_upstream.script({"text": "Hello there, dear friend", "delay_ms": 20})
    thread_id = f"thread-text-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Hi there")])

    result = run_js(version, generate_command(server.url, data))

    assert result["errors"] == []
    assert [exchange["status"] for exchange in result["http"]] == [200]
    final = result["final"]
    assert final["threadId"] == thread_id
    run_id = final["runId"]
    assert run_id and uuid.UUID(run_id)
    assert final["status"] == {"code": "Success", "__typename": "SuccessResponseStatus"}
    message = only_message(result)
    assert message["__typename"] == "TextMessageOutput"
    assert message["role"] == "assistant"
    assert message["status"]["code"] == "Success"
    assert message["status"]["__typename"] == "SuccessMessageStatus"
    # Chunks on the wire (the fake streams words), reassembled by the client.
    assert len(message["content"]) >= 2
    assert joined_content(message) == "Hello there, dear friend"
    (converted,) = result["messages"]
    assert (converted["type"], converted["content"]) == ("TextMessage", "Hello there, dear friend")

    run = finished_run(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.thread.thread_id == thread_id
    assert run.error_code == ""
    assert run.model == "gpt-4o-mini"
    assert run.request_type == "Chat"
    (model_request,) = fake_upstream.requests()
    assert run.input_tokens == prompt_words(model_request) > 0
    assert run.output_tokens == 4  # one token-bearing chunk per word
    assert run.started_at and run.first_token_at and run.finished_at

    rows = thread_rows(thread_id)
    assert [(row.message_id, row.role, row.kind, row.content) for row in rows] == [
        ("u1", "user", "text", "Hi there"),
        (message["id"], "assistant", "text", "Hello there, dear friend"),
    ]
    assert rows[1].status == "success"
    assert rows[1].run_id == run_id

    events = run_events(run_id)
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    types = [event.type for event in events]
    assert types[0] == "generation_start"
    assert types[-1] == "run_finished"
    assert {"text_start", "text_delta", "text_end", "generation_end"} <= set(types)
    assert replayed_text(events, message["id"]) == "Hello there, dear friend"


@versions
def test_long_reply_arrives_whole_and_the_log_is_coalesced(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script({"tokens": LONG_REPLY_TOKENS})
    thread_id = f"thread-long-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Talk a lot")])

    result = run_js(version, generate_command(server.url, data), timeout=120)

    assert result["errors"] == []
    message = only_message(result)
    expected = deterministic_tokens(LONG_REPLY_TOKENS)
    assert joined_content(message) == expected
    assert message["status"]["code"] == "Success"
    assert result["final"]["status"]["code"] == "Success"

    run = finished_run(result["final"]["runId"])
    assert run.status == RunStatus.SUCCEEDED
    assert run.output_tokens == LONG_REPLY_TOKENS
    events = run_events(run.id)
    assert [event.seq for event in events] == list(range(1, len(events) + 1))
    delta_rows = [event for event in events if event.type == "text_delta"]
    # Coalesced: a few rows per flush interval, nowhere near one row per token.
    assert 1 <= len(delta_rows) <= LONG_REPLY_TOKENS // 10
    assert len(events) < LONG_REPLY_TOKENS // 10
    assert replayed_text(events, message["id"]) == expected
    assert thread_rows(thread_id)[-1].content == expected


@versions
def test_multi_turn_thread_resends_history_without_duplicates(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script({"text": "Paris is the capital."}, {"text": "About two million people."})
    thread_id = f"thread-multi-{version}"
    first = generate_data(
        thread_id=thread_id, messages=[text_input("u1", "What is the capital of France?")]
    )
    command = {
        "op": "sequence",
        "url": server.url + "/api/copilotkit",
        "commands": [
            {"op": "generate", "data": first},
            {"op": "generate", "followUp": {"userText": "How many people live there?"}},
        ],
    }

    first_turn, second_turn = run_js(version, command)["results"]

    assert first_turn["errors"] == second_turn["errors"] == []
    first_answer = only_message(first_turn)
    second_answer = only_message(second_turn)
    assert joined_content(first_answer) == "Paris is the capital."
    assert joined_content(second_answer) == "About two million people."
    sent = second_turn["sentData"]
    assert sent["threadId"] == thread_id
    # The real client echoes the previous response's runId and resends the whole history.
    assert sent["runId"] == first_turn["final"]["runId"]
    assert [message["id"] for message in sent["messages"]][:2] == ["u1", first_answer["id"]]
    assert len(sent["messages"]) == 3

    first_run = finished_run(first_turn["final"]["runId"])
    second_run = finished_run(second_turn["final"]["runId"])
    assert first_run.status == second_run.status == RunStatus.SUCCEEDED
    assert second_run.previous_run_id == first_run.id
    rows = thread_rows(thread_id, include_superseded=True)
    assert [(row.role, row.content) for row in rows] == [
        ("user", "What is the capital of France?"),
        ("assistant", "Paris is the capital."),
        ("user", "How many people live there?"),
        ("assistant", "About two million people."),
    ]
    assert [row.position for row in rows] == sorted({row.position for row in rows})
    assert not any(row.superseded for row in rows)
    assert rows[0].message_id == "u1"
    assert rows[1].message_id == first_answer["id"]
    assert rows[3].message_id == second_answer["id"]

    first_request, second_request = fake_upstream.requests()
    assert [(m["role"], m["content"]) for m in first_request["messages"]] == [
        ("user", "What is the capital of France?")
    ]
    assert [(m["role"], m["content"]) for m in second_request["messages"]] == [
        ("user", "What is the capital of France?"),
        ("assistant", "Paris is the capital."),
        ("user", "How many people live there?"),
    ]


@versions
def test_request_without_thread_id_gets_a_generated_one(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script({"text": "A fresh thread."})
    data = generate_data(thread_id=None, messages=[text_input("u1", "Start something new")])

    result = run_js(version, generate_command(server.url, data))

    assert result["errors"] == []
    thread_id = result["final"]["threadId"]
    assert str(uuid.UUID(thread_id)) == thread_id
    answer = only_message(result)
    assert joined_content(answer) == "A fresh thread."
    thread = Thread.objects.get(thread_id=thread_id)
    run = finished_run(result["final"]["runId"])
    assert run.thread_id == thread.pk
    assert [(row.message_id, row.content) for row in thread_rows(thread_id)] == [
        ("u1", "Start something new"),
        (answer["id"], "A fresh thread."),
    ]
    assert Run.objects.filter(thread=thread).count() == 1


@versions
def test_unicode_quotes_and_whitespace_survive_the_stream(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    reply = 'Grüße 👋 日本語 "quoted" back\\slash new\nline  two  spaces\ttab'
    fake_upstream.script({"text": reply})
    thread_id = f"thread-unicode-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Sag hallo 👋")])

    result = run_js(version, generate_command(server.url, data))

    assert result["errors"] == []
    message = only_message(result)
    assert joined_content(message) == reply
    finished_run(result["final"]["runId"])
    assert [row.content for row in thread_rows(thread_id)] == ["Sag hallo 👋", reply]
    (model_request,) = fake_upstream.requests()
    assert model_request["messages"][-1]["content"] == "Sag hallo 👋"


@versions
def test_instructions_resent_with_fresh_ids_are_not_stored_or_duplicated(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    # react-core puts a system message (instructions and context) with a new id at the head
    # of every request; it reaches the model but is not part of the stored conversation.
    fake_upstream.script({"text": "First."}, {"text": "Second."})
    thread_id = f"thread-instructions-{version}"
    first = generate_data(
        thread_id=thread_id,
        messages=[
            text_input("sys-a", "You are a helpful assistant.", role="system"),
            text_input("u1", "One"),
        ],
    )
    first_turn = run_js(version, generate_command(server.url, first))
    first_answer = only_message(first_turn)
    finished_run(first_turn["final"]["runId"])
    second = generate_data(
        thread_id=thread_id,
        run_id=first_turn["final"]["runId"],
        messages=[
            text_input("sys-b", "You are a helpful assistant.", role="system"),
            text_input("u1", "One"),
            text_input(first_answer["id"], "First.", role="assistant"),
            text_input("u2", "Two"),
        ],
    )

    second_turn = run_js(version, generate_command(server.url, second))

    assert second_turn["errors"] == []
    second_answer = only_message(second_turn)
    assert finished_run(second_turn["final"]["runId"]).status == RunStatus.SUCCEEDED
    rows = thread_rows(thread_id, include_superseded=True)
    assert [(row.message_id, row.superseded) for row in rows] == [
        ("u1", False),
        (first_answer["id"], False),
        ("u2", False),
        (second_answer["id"], False),
    ]
    second_request = fake_upstream.requests()[1]
    assert [(m["role"], m["content"]) for m in second_request["messages"]] == [
        ("system", "You are a helpful assistant."),
        ("user", "One"),
        ("assistant", "First."),
        ("user", "Two"),
    ]


def test_concurrent_turns_on_two_threads_stay_apart(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    # Per-request scripts (a FAKE line in the user's message), slow enough to overlap.
    replies = {version: f"reply for {version} " + "word " * 30 for version in JS_CLIENT_VERSIONS}

    def chat(version: str) -> dict[str, Any]:
        directive = json.dumps({"text": replies[version].strip(), "delay_ms": 25})
        data = generate_data(
            thread_id=f"thread-concurrent-{version}",
            messages=[text_input(f"u-{version}", f"Go\nFAKE: {directive}")],
        )
        return run_js(version, generate_command(server.url, data))

    with ThreadPoolExecutor(max_workers=len(JS_CLIENT_VERSIONS)) as pool:
        results = dict(zip(JS_CLIENT_VERSIONS, pool.map(chat, JS_CLIENT_VERSIONS), strict=True))

    assert fake_upstream.stats()["requests"] == len(JS_CLIENT_VERSIONS)
    for version, result in results.items():
        assert result["errors"] == [], version
        assert result["final"]["threadId"] == f"thread-concurrent-{version}"
        assert joined_content(only_message(result)) == replies[version].strip()
        run = finished_run(result["final"]["runId"])
        assert run.status == RunStatus.SUCCEEDED
        rows = thread_rows(f"thread-concurrent-{version}")
        assert [row.message_id for row in rows] == [f"u-{version}", only_message(result)["id"]]
        assert rows[1].content == replies[version].strip()
    first, second = (
        Run.objects.get(pk=results[version]["final"]["runId"]) for version in JS_CLIENT_VERSIONS
    )
    assert first.pk != second.pk
    # They really ran at the same time.
    assert first.started_at < second.finished_at
    assert second.started_at < first.finished_at
