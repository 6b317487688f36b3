"""``copilot_runtime.urls`` is includable on its own: both protocols and every sub-route at
the mount point, nothing else of the standalone site."""

from __future__ import annotations

import orjson
import pytest
from django.test import AsyncClient, override_settings

from tests.copilot_runtime.agui.helpers import read_events, run_body, user

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("_close_run_thread_connections"),
]


@override_settings(ROOT_URLCONF="tests.support.host_urls")
async def test_a_host_that_includes_the_runtime_serves_both_protocols_and_nothing_else() -> None:
    client = AsyncClient()
    info = await client.get("/api/copilotkit/info")
    hello = await client.post(
        "/api/copilotkit", orjson.dumps({"query": "{ hello }"}), content_type="application/json"
    )
    envelope = await client.post(
        "/api/copilotkit/", orjson.dumps({"method": "info"}), content_type="application/json"
    )
    run = await client.post(
        "/api/copilotkit/agent/default/run",
        orjson.dumps(run_body("host-thread", [user("u1", "Hi")])),
        content_type="application/json",
    )

    assert info.status_code == 200 and "default" in orjson.loads(info.content)["agents"]
    assert orjson.loads(hello.content) == {"data": {"hello": "Hello World"}}
    assert envelope.status_code == 200 and "singleRoute" in orjson.loads(envelope.content)
    assert [e["type"] for e in await read_events(run)][-1] == "RUN_FINISHED"
    # The standalone site's pages are not part of the runtime's URLs.
    assert (await client.get("/admin/")).status_code == 404
    assert (await client.get("/")).status_code == 404
