"""Served through WSGI (Django's test Client is WSGI, like runserver), a request that would
stream is refused with the fix named; what does not stream is served."""

from __future__ import annotations

import orjson
import pytest
from django.test import Client

from conversations.models import Run
from tests.copilot_runtime.agui.helpers import run_body, user
from tests.copilot_runtime.graphql.helpers import document

pytestmark = pytest.mark.django_db

ENDPOINT = "/api/copilotkit"


def assert_asgi_required(response: object) -> None:
    assert response.status_code == 501, response.content
    payload = orjson.loads(response.content)
    assert payload["error"] == "asgi_required"
    assert "uvicorn" in payload["message"]


@pytest.mark.parametrize("action", ["run", "connect", "suggest"])
def test_a_v2_stream_under_wsgi_is_refused_naming_the_fix(client: Client, action: str) -> None:
    response = client.post(
        f"{ENDPOINT}/agent/default/{action}",
        orjson.dumps(run_body("wsgi-thread", [user("u1", "Hi")])),
        content_type="application/json",
    )
    assert_asgi_required(response)
    assert not Run.objects.exists()


def test_the_v1_generate_mutation_under_wsgi_is_refused(client: Client) -> None:
    response = client.post(
        ENDPOINT,
        orjson.dumps(
            {
                "query": document("generate_copilot_response"),
                "operationName": "generateCopilotResponse",
                "variables": {"data": {"metadata": {}, "frontend": {"actions": []}}},
            }
        ),
        content_type="application/json",
    )
    assert_asgi_required(response)


def test_what_does_not_stream_is_served_under_wsgi(client: Client) -> None:
    assert client.get(f"{ENDPOINT}/info").status_code == 200
    hello = client.post(
        ENDPOINT, orjson.dumps({"query": "{ hello }"}), content_type="application/json"
    )
    assert orjson.loads(hello.content) == {"data": {"hello": "Hello World"}}
