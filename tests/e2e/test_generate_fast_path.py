"""The dedicated encoder (``copilot_runtime.graphql.fastpath``) meets the real client's document.

The server recognises the mutation every CopilotKit client sends by comparing its canonical
print with ``client_mutation_printed()``, and answers it from the run's events without
generic GraphQL execution. These tests send what the real clients send (captured per version)
and what the server believes they send, and check both are answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from graphql import parse, print_ast

from conversations.models import Run, RunStatus
from copilot_runtime.graphql.fastpath.documents import client_mutation_printed
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.support.client_capture import captured_generate_request
from tests.support.generate_e2e import (
    GRAPHQL_PATH,
    assert_no_traceback,
    finished_run,
    generate_data,
    text_input,
)

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

pytestmark = pytest.mark.e2e

versions = pytest.mark.parametrize("version", JS_CLIENT_VERSIONS)


@versions
def test_the_real_clients_document_is_the_one_the_fast_path_recognises(version: str) -> None:
    sent = captured_generate_request(version)

    assert sent.operation_name == "generateCopilotResponse"
    # Compared by canonical print, as the server compares them: whitespace does not matter,
    # every field and __typename does.
    assert print_ast(parse(sent.query)) == client_mutation_printed()


def test_the_canonical_client_document_is_answered(
    server: ServedProcess, fake_upstream: FakeUpstream
) -> None:
    fake_upstream.script({"text": "Served by the fast path."})
    version = JS_CLIENT_VERSIONS[0]
    data = generate_data(thread_id="thread-fast-path", messages=[text_input("u1", "Hi")])
    body = {
        "operationName": "generateCopilotResponse",
        "query": client_mutation_printed(),
        "variables": {"data": data, "properties": {}},
    }
    command = {
        "op": "raw",
        "url": server.url + GRAPHQL_PATH,
        "accept": captured_generate_request(version).headers["accept"],
        "body": body,
    }

    raw = run_js(version, command)

    assert raw["status"] == 200, raw["text"][:300]
    assert_no_traceback(raw["text"])
    assert raw["headers"]["content-type"].startswith("multipart/mixed")
    assert '"SuccessResponseStatus"' in raw["text"]
    # The reply's words reached the runtime in one read: the first goes out alone, the rest
    # of the read as one chunk.
    assert '"Served"' in raw["text"]
    assert '" by the fast path."' in raw["text"]
    assert raw["text"].endswith("--\r\n")
    (model_request,) = fake_upstream.requests()
    assert model_request["messages"][-1]["content"] == "Hi"
    (run,) = Run.objects.filter(thread__thread_id="thread-fast-path")
    assert finished_run(run.id).status == RunStatus.SUCCEEDED
