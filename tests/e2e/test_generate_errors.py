"""``generateCopilotResponse`` end to end: failures the client must see cleanly.

Upstream errors become a ``FailedResponseStatus``; a busy thread, a refused ``Accept`` and
malformed documents or variables become GraphQL errors (HTTP 200) or a 406, never a traceback.
The real CopilotKit client (both pinned versions) drives the served process; raw exchanges go
through the driver's ``raw`` op (plain fetch) or httpx where the bytes themselves matter.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from conversations.models import Run, RunStatus
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.client_capture import captured_generate_request
from tests.support.generate_e2e import (
    GRAPHQL_PATH,
    assert_no_traceback,
    finished_run,
    generate_command,
    generate_data,
    graphql_error_codes,
    joined_content,
    text_input,
    thread_rows,
    wait_for,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = pytest.mark.e2e

versions = pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)


def mutation_body(data: dict[str, Any], *, version: str = JS_CLIENT_VERSIONS[0]) -> dict[str, Any]:
    """The body the real client posts: its own mutation document and these variables."""
    return json.loads(captured_generate_request(version).body(data))


def raw_command(
    server: ServedProcess, body: Any, *, version: str = JS_CLIENT_VERSIONS[0], accept: str = ""
) -> dict[str, Any]:
    """A driver ``raw`` exchange with the real client's Accept header (unless overridden)."""
    return {
        "op": "raw",
        "url": server.url + GRAPHQL_PATH,
        "accept": accept or captured_generate_request(version).headers["accept"],
        "body": body,
    }


UPSTREAM_FAILURES = [
    pytest.param(
        {"status": 500, "message": "the model server fell over"},
        "UPSTREAM_SERVER_ERROR",
        "NETWORK_ERROR",
        id="upstream-500",
    ),
    pytest.param(
        {"status": 429, "message": "slow down", "retry_after": 7},
        "UPSTREAM_RATE_LIMITED",
        "CONFIGURATION_ERROR",
        id="upstream-429",
    ),
]


@versions
@pytest.mark.parametrize(("upstream_error", "expected_code", "client_code"), UPSTREAM_FAILURES)
def test_upstream_failure_becomes_a_failed_response_status(
    server: ServedProcess,
    fake_upstream: FakeUpstream,
    version: str,
    upstream_error: dict[str, Any],
    expected_code: str,
    client_code: str,
) -> None:
    fake_upstream.script({"error": upstream_error}, {"error": upstream_error})
    thread_id = f"thread-upstream-{upstream_error['status']}-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Hello?")])

    result = run_js(version, generate_command(server.url, data))

    assert [exchange["status"] for exchange in result["http"]] == [200]
    final = result["final"]
    assert final["threadId"] == thread_id
    status = final["status"]
    assert status["__typename"] == "FailedResponseStatus"
    assert status["code"] == "Failed"
    assert status["reason"] == "UNKNOWN_ERROR"
    details = status["details"]
    assert details["code"] == expected_code
    assert details["statusCode"] == upstream_error["status"]
    # The code the frontend turns into its banner: the TypeScript runtime 1.10.6's class.
    assert details["originalError"]["code"] == client_code
    assert isinstance(details["description"], str) and details["description"]
    if "retry_after" in upstream_error:
        assert details["retryAfter"] == upstream_error["retry_after"]
    else:
        assert "retryAfter" not in details
    assert final["messages"] == []
    assert_no_traceback(json.dumps(result))

    run = finished_run(final["runId"])
    assert run.status == RunStatus.FAILED
    assert run.error_code == expected_code
    assert run.error_details and run.error_details["message"]
    # The user's message is stored even though the model never answered.
    assert [row.message_id for row in thread_rows(thread_id)] == ["u1"]

    raw_data = generate_data(
        thread_id=f"{thread_id}-raw", messages=[text_input("u1", "Hello again?")]
    )
    raw = run_js(
        version, raw_command(server, mutation_body(raw_data, version=version), version=version)
    )
    assert raw["status"] == 200
    assert raw["headers"]["content-type"].startswith("multipart/mixed")
    assert expected_code in raw["text"]
    assert "FailedResponseStatus" in raw["text"]
    assert_no_traceback(raw["text"])
    assert len(fake_upstream.requests()) == 2


@versions
def test_upstream_stream_cut_mid_reply_fails_the_message_and_keeps_the_partial_text(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script({"text": "One two three four five six", "fail_after_tokens": 3})
    thread_id = f"thread-stream-cut-{version}"
    data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Count")])

    result = run_js(version, generate_command(server.url, data))

    final = result["final"]
    status = final["status"]
    assert status["__typename"] == "FailedResponseStatus"
    assert status["reason"] == "UNKNOWN_ERROR"
    assert status["details"]["code"] == "UPSTREAM_STREAM_CUT"
    assert status["details"]["description"]
    (message,) = final["messages"]
    assert joined_content(message) == "One two three"
    assert message["status"]["__typename"] == "FailedMessageStatus"
    assert message["status"]["reason"] == "Error streaming message content"
    assert_no_traceback(json.dumps(result))

    run = finished_run(final["runId"])
    assert run.status == RunStatus.FAILED
    assert run.error_code == "UPSTREAM_STREAM_CUT"
    user_row, partial = thread_rows(thread_id)
    assert user_row.message_id == "u1"
    assert (partial.message_id, partial.content) == (message["id"], "One two three")
    assert partial.status == "failed"
    assert partial.status_reason == "Error streaming message content"


@versions
def test_second_request_on_a_busy_thread_is_refused_until_the_first_ends(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    fake_upstream.script({"hang": True})
    thread_id = f"thread-busy-{version}"
    busy_data = generate_data(thread_id=thread_id, messages=[text_input("u1", "Take your time")])
    client_request = captured_generate_request(version)

    with (
        httpx.Client(timeout=30) as holder,
        holder.stream(
            "POST",
            server.url + GRAPHQL_PATH,
            content=client_request.body(busy_data),
            headers=client_request.request_headers(),
        ) as held,
    ):
        assert held.status_code == 200
        # The first part (threadId, runId) arrives before the model answers anything. The
        # iterator is kept (not abandoned by a `break`): dropping it closes the connection.
        chunks = held.iter_raw()
        received = b""
        while b'"runId"' not in received:
            received += next(chunks)
        assert f'"threadId":"{thread_id}"'.encode() in received
        busy_run = wait_for(
            lambda: Run.objects.filter(
                thread__thread_id=thread_id, status=RunStatus.RUNNING
            ).first(),
            what="the first run to be running",
        )

        second_data = generate_data(
            thread_id=thread_id,
            messages=[text_input("u1", "Take your time"), text_input("u2", "Are you there?")],
        )
        refused = run_js(version, generate_command(server.url, second_data))

        assert [exchange["status"] for exchange in refused["http"]] == [200]
        assert "THREAD_BUSY" in graphql_error_codes(refused), refused["errors"]
        # Reported through handleGQLErrors, i.e. shown to the user (as a toast).
        (error,) = refused["errors"]
        assert "handleGQLErrors" in error["via"]
        assert error["graphQLErrors"][0]["extensions"]["visibility"] == "toast"
        assert refused["final"] is None
        assert_no_traceback(json.dumps(refused))
        assert Run.objects.filter(thread__thread_id=thread_id).count() == 1
    # Leaving the block closed the held connection: the client went away.

    cancelled = finished_run(busy_run.id)
    assert cancelled.status == RunStatus.CANCELLED
    wait_for(
        lambda: fake_upstream.stats()["client_closed"] >= 1,
        timeout=5,
        what="the fake upstream to see its connection closed",
    )

    fake_upstream.script({"text": "Yes, I am here."})
    retry_data = generate_data(
        thread_id=thread_id,
        messages=[text_input("u1", "Take your time"), text_input("u2", "Are you there?")],
    )
    retried = run_js(version, generate_command(server.url, retry_data))

    assert retried["errors"] == []
    assert retried["final"]["status"]["code"] == "Success"
    assert joined_content(retried["final"]["messages"][0]) == "Yes, I am here."
    assert finished_run(retried["final"]["runId"]).status == RunStatus.SUCCEEDED


def test_json_only_accept_on_the_streaming_mutation_is_406(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    data = generate_data(thread_id="thread-406", messages=[text_input("u1", "Hi")])

    raw = run_js(
        JS_CLIENT_VERSIONS[0], raw_command(server, mutation_body(data), accept="application/json")
    )

    assert raw["status"] == 406
    assert "multipart/mixed" in raw["headers"]["accept"]
    assert_no_traceback(raw["text"])
    assert fake_upstream.requests() == []
    assert not Run.objects.filter(thread__thread_id="thread-406").exists()


MALFORMED_REQUESTS = {
    "syntax error": lambda data: {
        "query": "mutation generateCopilotResponse($data: GenerateCopilotResponseInput!) {",
        "variables": {"data": data},
    },
    "unknown field": lambda data: {
        "query": "mutation m($data: GenerateCopilotResponseInput!) {"
        " generateCopilotResponse(data: $data) { threadId noSuchField } }",
        "variables": {"data": data},
    },
    "messages as a string": lambda data: mutation_body({**data, "messages": "not a list"}),
    "data missing": lambda data: {**mutation_body(data), "variables": {}},
    "variables not an object": lambda data: {**mutation_body(data), "variables": "oops"},
    "thread id of the wrong type": lambda data: mutation_body({**data, "threadId": {"a": 1}}),
}


def test_malformed_documents_and_variables_answer_errors_without_traceback(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    data = generate_data(thread_id="thread-malformed", messages=[text_input("u1", "Hi")])

    for case, build in MALFORMED_REQUESTS.items():
        raw = run_js(JS_CLIENT_VERSIONS[0], raw_command(server, build(data)))

        assert raw["status"] == 200, (case, raw)
        payload = json.loads(raw["text"])
        assert payload.get("errors"), (case, payload)
        for error in payload["errors"]:
            assert error["message"], (case, error)
            assert error["extensions"]["code"] == "BAD_REQUEST", (case, error)
        assert not payload.get("data"), (case, payload)
        assert_no_traceback(raw["text"])

    assert fake_upstream.requests() == []
    assert not Run.objects.exists()


@versions
def test_real_client_sending_wrong_variables_sees_a_graphql_error(
    server: ServedProcess, fake_upstream: FakeUpstream, version: str
) -> None:
    data = generate_data(thread_id="thread-wrong-variables", messages=[])
    data["messages"] = "not a list of messages"

    result = run_js(version, generate_command(server.url, data))

    assert [exchange["status"] for exchange in result["http"]] == [200]
    assert "BAD_REQUEST" in graphql_error_codes(result), result["errors"]
    assert_no_traceback(json.dumps(result))
    assert fake_upstream.requests() == []
    assert not Run.objects.exists()
