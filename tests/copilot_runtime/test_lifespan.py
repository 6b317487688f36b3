"""The ASGI lifespan: startup settles the garbage collector and completes, and shutdown closes
the turn store's pools and the model adapters' HTTP pools."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from django.test import override_settings

from conversations.store.pg.pools import POOLS
from copilot_runtime.adapters import adapter_from_settings
from copilot_runtime.collector import SERVER_THRESHOLDS
from copilot_runtime.lifespan import lifespan
from copilot_runtime.site.asgi import application

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("collector_restored"),
]


async def run_lifespan(app: Any) -> list[str]:
    inbox: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    for kind in ("lifespan.startup", "lifespan.shutdown"):
        inbox.put_nowait({"type": kind})
    sent: list[str] = []

    async def send(message: dict[str, str]) -> None:
        sent.append(message["type"])

    await asyncio.wait_for(app({"type": "lifespan"}, inbox.get, send), 5)
    return sent


async def test_shutdown_closes_the_pools_this_loop_opened() -> None:
    pool = await POOLS.get()  # opens this loop's pool
    async with pool.connection() as connection:
        await connection.execute("SELECT 1")
    assert not connection.closed  # kept idle in the pool

    assert await run_lifespan(lifespan) == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    assert connection.closed
    assert await POOLS.get() is not pool  # a later turn opens a new one


async def test_shutdown_closes_the_model_adapters_http_pool(fake_upstream: Any) -> None:
    runtime = {"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": fake_upstream.base_url}
    with override_settings(COPILOT_RUNTIME=runtime):
        adapter = adapter_from_settings()
        pool = adapter._transport._pool
        # A first turn's stream, read to its end: its connection is kept alive for the next.
        batches = adapter._transport.event_batches(
            f"{fake_upstream.base_url}/chat/completions",
            {"model": "fake", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        )
        assert [batch async for batch in batches][-1][-1] == b"[DONE]"
        assert pool.open_connections == 1

        assert await run_lifespan(lifespan) == [
            "lifespan.startup.complete",
            "lifespan.shutdown.complete",
        ]

        assert pool.open_connections == 0
        assert adapter_from_settings() is not adapter  # a later turn builds a new one
    await POOLS.close_all()


async def test_startup_settles_the_garbage_collector() -> None:
    gc.set_threshold(700, 10, 10)

    await run_lifespan(lifespan)

    assert gc.get_threshold() == SERVER_THRESHOLDS and gc.get_freeze_count() > 0
    await POOLS.close_all()


async def test_the_standalone_application_routes_the_lifespan() -> None:
    assert await run_lifespan(application) == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    await POOLS.close_all()


async def test_a_host_lifespan_starts_before_the_runtime_and_stops_after_it() -> None:
    from copilot_runtime import lifespan as runtime_lifespan_module
    from copilot_runtime.lifespan import lifespan_with

    order: list[str] = []

    async def host(scope: Any, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                order.append("host started")
                await send({"type": "lifespan.startup.complete"})
            else:
                order.append("host stopped")
                await send({"type": "lifespan.shutdown.complete"})
                return

    runtime_lifespan_module._started = False
    assert await run_lifespan(lifespan_with(host)) == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    assert order == ["host started", "host stopped"]
    assert runtime_lifespan_module._started  # the runtime's startup ran too


async def test_a_host_application_without_a_lifespan_is_left_out() -> None:
    """Django's own handler refuses the lifespan scope: the runtime's lifespan goes on alone."""
    from django.core.asgi import get_asgi_application

    from copilot_runtime.lifespan import lifespan_with

    assert await run_lifespan(lifespan_with(get_asgi_application())) == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]


async def test_a_host_startup_failure_is_reported_to_the_server() -> None:
    from copilot_runtime.lifespan import lifespan_with

    async def failing(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "lifespan.startup.failed", "message": "no cache"})

    assert await run_lifespan(lifespan_with(failing)) == ["lifespan.startup.failed"]


async def test_without_lifespan_events_the_front_does_the_startup_on_the_first_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """daphne sends no lifespan events: the first HTTP request settles the process, once."""
    from copilot_runtime import lifespan as runtime_lifespan_module
    from copilot_runtime.endpoints.front import RuntimeFront

    settled: list[int] = []
    monkeypatch.setattr(runtime_lifespan_module, "settle_collector", lambda: settled.append(1))
    monkeypatch.setattr(runtime_lifespan_module, "_started", False)
    answered: list[str] = []

    async def django(scope: Any, receive: Any, send: Any) -> None:
        answered.append(scope["path"])

    front = RuntimeFront(django)
    for path in ("/admin/", "/healthz"):
        scope = {"type": "http", "method": "GET", "path": path, "headers": []}
        await front(scope, None, None)

    assert answered == ["/admin/", "/healthz"]
    assert settled == [1]
