"""Whatever is sent to ``/api/copilotkit``, the answer is a clean 4xx or a GraphQL error."""

from __future__ import annotations

import orjson
import pytest
from django.test import AsyncClient, Client, override_settings

from tests.copilot_runtime.graphql.helpers import document
from tests.copilot_runtime.http.helpers import (
    ENDPOINT,
    LOAD_AGENT_STATE,
    assert_no_traceback,
    body_of,
    error_code,
    post_graphql,
    post_json,
)

pytestmark = pytest.mark.django_db


def assert_json_refusal(response: object, status: int) -> dict[str, object]:
    assert_no_traceback(response)
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = body_of(response)
    assert isinstance(body, dict) and body.get("error"), body
    return body


# --- transport-level refusals -----------------------------------------------------------------


def test_malformed_json_is_400(client: Client) -> None:
    response = client.post(ENDPOINT, data=b'{"query": ', content_type="application/json")

    body = assert_json_refusal(response, 400)
    assert body["error"] == "invalid_request"
    assert body["message"] == "Invalid JSON payload"
    assert "not valid JSON" in body["details"]


def test_an_empty_body_is_400(client: Client) -> None:
    # The test client drops the Content-Type of an empty body; a browser's fetch keeps it.
    response = client.post(
        ENDPOINT, data=b"", content_type="application/json", CONTENT_TYPE="application/json"
    )

    assert_json_refusal(response, 400)


def test_json_with_neither_query_nor_method_is_400(client: Client) -> None:
    response = post_json(client, {"variables": {}, "operationName": "hello"})

    body = assert_json_refusal(response, 400)
    assert body["error"] == "invalid_request"


@pytest.mark.parametrize("payload", [[{"query": "{ hello }"}], "{ hello }", 42, None])
def test_json_that_is_not_an_object_is_400(client: Client, payload: object) -> None:
    response = post_json(client, payload)

    assert_json_refusal(response, 400)


@pytest.mark.parametrize(
    ("content_type", "data"),
    [
        ("text/html", b"<p>hello</p>"),
        ("application/x-www-form-urlencoded", b"query=%7B+hello+%7D"),
        ("application/xml", b"<query>hello</query>"),
    ],
)
def test_a_non_json_content_type_is_415(client: Client, content_type: str, data: bytes) -> None:
    response = client.post(ENDPOINT, data=data, content_type=content_type)

    assert_json_refusal(response, 415)


def test_multipart_form_data_is_415(client: Client) -> None:
    response = client.post(ENDPOINT, data={"query": "{ hello }"})

    assert_json_refusal(response, 415)


def test_text_that_is_not_json_is_415_as_on_the_typescript_single_route(client: Client) -> None:
    response = client.post(ENDPOINT, data=b"hello", content_type="text/plain")

    body = assert_json_refusal(response, 415)
    assert body == {
        "error": "invalid_request",
        "message": "Single-route endpoint expects JSON payloads",
    }


def test_graphql_sent_as_text_plain_is_accepted(client: Client) -> None:
    response = client.post(ENDPOINT, data=b'{"query": "{ hello }"}', content_type="text/plain")

    assert response.status_code == 200
    assert body_of(response) == {"data": {"hello": "Hello World"}}


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "application/graphql-response+json"]
)
def test_json_content_types_with_parameters_or_suffixes_are_accepted(
    client: Client, content_type: str
) -> None:
    response = client.post(ENDPOINT, data=b'{"query": "{ hello }"}', content_type=content_type)

    assert response.status_code == 200
    assert body_of(response) == {"data": {"hello": "Hello World"}}


@override_settings(COPILOT_RUNTIME={"MAX_BODY_BYTES": 64})
def test_a_body_over_the_limit_is_413(client: Client) -> None:
    response = post_graphql(client, "{ hello }", {"padding": "x" * 200})

    body = assert_json_refusal(response, 413)
    assert body["error"] == "payload_too_large"


@override_settings(COPILOT_RUNTIME={"MAX_BODY_BYTES": 64})
def test_a_body_within_the_limit_passes(client: Client) -> None:
    response = post_graphql(client, "{ hello }")

    assert response.status_code == 200


def test_a_large_body_under_the_configured_limit_is_accepted(client: Client) -> None:
    # An image message easily weighs a few megabytes; the default limit is 10 MB.
    response = post_graphql(client, "{ hello }", {"image": "A" * (3 * 1024 * 1024)})

    assert_no_traceback(response)
    assert response.status_code == 200, response.content
    assert body_of(response) == {"data": {"hello": "Hello World"}}


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_other_methods_are_405_with_allow(client: Client, method: str) -> None:
    response = getattr(client, method)(ENDPOINT)

    assert_json_refusal(response, 405)
    assert response["Allow"] == "POST"


def test_an_unsupported_envelope_method_is_400(client: Client) -> None:
    response = post_json(client, {"method": "no/such/method", "params": {}})

    body = assert_json_refusal(response, 400)
    assert "no/such/method" in str(body["message"])


def test_an_unknown_sub_path_is_404(client: Client) -> None:
    response = client.post(ENDPOINT + "/nope", data=b"{}", content_type="application/json")

    assert_no_traceback(response)
    assert response.status_code == 404
    assert body_of(response) == {"error": "Not found"}
    assert client.get(ENDPOINT + "/nope/deeper").status_code == 404


def test_the_endpoint_answers_with_a_trailing_slash(client: Client) -> None:
    response = client.post(
        ENDPOINT + "/", data=b'{"query": "{ hello }"}', content_type="application/json"
    )

    assert response.status_code == 200
    assert body_of(response) == {"data": {"hello": "Hello World"}}


# --- GraphQL-level errors: HTTP 200 with errors ------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        pytest.param({"query": "{ hello "}, "Syntax Error", id="syntax-error"),
        pytest.param({"query": "{ nope }"}, "nope", id="unknown-field"),
        pytest.param(
            {"query": "query a { hello } query b { hello }", "operationName": "c"},
            "c",
            id="unknown-operation-name",
        ),
        pytest.param(
            {"query": "query a { hello } query b { hello }"},
            "operation",
            id="ambiguous-operation",
        ),
        pytest.param(
            {"query": LOAD_AGENT_STATE, "variables": {"data": 42}},
            "data",
            id="wrong-variable-type",
        ),
        pytest.param(
            {"query": LOAD_AGENT_STATE, "variables": {"data": {"threadId": "t"}}},
            "agentName",
            id="missing-input-field",
        ),
        pytest.param({"query": LOAD_AGENT_STATE}, "data", id="missing-variables"),
        pytest.param({"query": 42}, "query", id="query-not-a-string"),
        pytest.param({"query": "{ hello }", "variables": [1]}, "variables", id="variables-list"),
        pytest.param(
            {"query": "{ hello }", "operationName": 7}, "operationName", id="operation-name-int"
        ),
    ],
)
def test_bad_graphql_is_200_with_errors(
    client: Client, payload: dict[str, object], fragment: str
) -> None:
    response = post_json(client, payload)

    assert_no_traceback(response)
    assert error_code(response) == "BAD_REQUEST"
    messages = " ".join(error["message"] for error in body_of(response)["errors"])
    assert fragment in messages


async def test_a_streaming_operation_without_a_streaming_accept_is_406() -> None:
    response = await AsyncClient().post(
        ENDPOINT,
        data=orjson.dumps(
            {
                "query": document("generate_copilot_response"),
                "operationName": "generateCopilotResponse",
                "variables": {"data": {"metadata": {}, "frontend": {"actions": []}}},
            }
        ),
        content_type="application/json",
        headers={"Accept": "application/json"},
    )

    assert_no_traceback(response)
    assert response.status_code == 406
    body = body_of(response)
    assert body["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
    assert "multipart/mixed" in response["Accept"]
