"""Generated requests against every runtime surface: v1 GraphQL variables, the v2 run input,
the single-route envelope and the threads API.

For every request: no 5xx, no traceback or server path in the answer. After each batch: no run
left pending or running, and a normal request is still served.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings

from copilot_runtime.graphql.fastpath.documents import client_mutation_printed
from tests.fuzz import strategies
from tests.fuzz.checks import check_no_run_left_open, check_reply, check_still_serving
from tests.support.asgi_call import call

pytestmark = pytest.mark.django_db(transaction=True)

BASE = "/api/copilotkit"
SSE = {"accept": "text/event-stream"}
GRAPHQL = {"accept": "multipart/mixed, application/json"}


@pytest.fixture
async def after_the_batch(runtime: Any) -> Any:
    await check_still_serving(thread_id=strategies.KNOWN_THREAD)
    yield
    await check_no_run_left_open()
    await check_still_serving()


@settings(settings.get_profile("fuzz"))
@given(data=strategies.v1_data, properties=strategies.v1_properties)
async def test_v1_generate_variables(after_the_batch: Any, data: Any, properties: Any) -> None:
    body = {
        "operationName": "generateCopilotResponse",
        "query": client_mutation_printed(),
        "variables": {"data": data, "properties": properties},
    }
    reply = await call(BASE, strategies.body_bytes(body), headers=GRAPHQL)
    check_reply(reply, "v1 generateCopilotResponse")


@settings(settings.get_profile("fuzz"))
@given(body=strategies.v2_body)
async def test_v2_run_input(after_the_batch: Any, body: Any) -> None:
    reply = await call(f"{BASE}/agent/default/run", strategies.body_bytes(body), headers=SSE)
    check_reply(reply, "v2 agent/run")


@settings(settings.get_profile("fuzz"))
@given(body=strategies.v2_body)
async def test_v2_connect_input(after_the_batch: Any, body: Any) -> None:
    reply = await call(f"{BASE}/agent/default/connect", strategies.body_bytes(body), headers=SSE)
    check_reply(reply, "v2 agent/connect")


@settings(settings.get_profile("fuzz"))
@given(envelope=strategies.envelope)
async def test_single_route_envelope(after_the_batch: Any, envelope: Any) -> None:
    reply = await call(BASE, strategies.body_bytes(envelope), headers=SSE)
    check_reply(reply, f"envelope {envelope.get('method')!r}")


@settings(settings.get_profile("fuzz"))
@given(request=strategies.thread_request)
async def test_threads_api(after_the_batch: Any, request: Any) -> None:
    method, path, query, body = request
    reply = await call(
        f"{BASE}/{path}",
        b"" if body is None else strategies.body_bytes(body),
        method=method,
        query_string=urlencode(query).encode(),
    )
    check_reply(reply, f"{method} {path}")
