"""Stops told on the channel layer: one group, one listener per event loop, each stop to its run.

On the Redis pub/sub layer against a real Redis (the layer the standalone site uses with Redis),
and on the in-memory layer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
import redis
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings

from conversations.models import Run, RunStatus
from copilot_runtime.graphql.turn_input import parse_generate_input
from copilot_runtime.runs import stops as stops_module
from copilot_runtime.runs.execute import run_execute
from copilot_runtime.runs.executor import run_cancel
from copilot_runtime.runs.start import turn_prepare
from copilot_runtime.runs.stops import STOP_GROUP, LoopStops, announce_stop, stops_for_loop
from tests.copilot_runtime.runs.test_layer_publish import _redis_url
from tests.support.generate_e2e import generate_data, text_input

IN_MEMORY = "channels.layers.InMemoryChannelLayer"
REDIS_PUBSUB = "channels_redis.pubsub.RedisPubSubChannelLayer"


def _layers(backend: str) -> dict[str, Any]:
    config: dict[str, Any] = {} if backend == IN_MEMORY else {"hosts": [_redis_url()]}
    return {"default": {"BACKEND": backend, "CONFIG": config}}


@pytest.fixture(params=[IN_MEMORY, REDIS_PUBSUB], ids=["in-memory", "pubsub"])
def layer(request: pytest.FixtureRequest, redis_client: redis.Redis) -> Iterator[Any]:
    with override_settings(CHANNEL_LAYERS=_layers(request.param)):
        yield get_channel_layer()


def _group_channel(layer: Any) -> str:
    return str(layer._get_layer()._get_group_channel_name(STOP_GROUP))


async def _until(condition: Callable[[], bool], *, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + 5.0
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def _announce_until_heard(run_id: str, heard: list[str]) -> None:
    """Told again until heard: the listener joins the group a moment after the first run."""
    for _ in range(300):
        await announce_stop(run_id)
        await asyncio.sleep(0.01)
        if run_id in heard:
            return
    raise AssertionError(f"the stop of {run_id} was never heard")


async def test_a_stop_reaches_the_run_it_names_and_no_other(layer: Any) -> None:
    stops = LoopStops()
    heard: list[str] = []
    for run_id in ("run-a", "run-b", "run-c"):
        stops.register(run_id, lambda run_id=run_id: heard.append(run_id))
    # A run of the test's own, stopped last: once it has heard, so has every run before it.
    last: list[str] = []
    stops.register("run-last", lambda: last.append("run-last"))
    try:
        await _announce_until_heard("run-b", heard)
        await announce_stop("run-elsewhere")  # a run another process executes: ignored
        await _announce_until_heard("run-last", last)
        assert set(heard) == {"run-b"}
    finally:
        for run_id in ("run-a", "run-b", "run-c", "run-last"):
            stops.unregister(run_id)


async def test_one_subscription_serves_every_run_of_the_loop_until_the_last_ends(
    redis_client: redis.Redis,
) -> None:
    with override_settings(CHANNEL_LAYERS=_layers(REDIS_PUBSUB)):
        layer = get_channel_layer()
        group_channel = _group_channel(layer)

        def subscribers() -> int:
            [(_channel, count)] = redis_client.pubsub_numsub(group_channel)
            return int(count)

        stops = LoopStops()
        run_ids = [f"run-{index}" for index in range(20)]
        for run_id in run_ids:
            stops.register(run_id, lambda: None)
        await _until(lambda: subscribers() == 1, what="the loop's one subscription")
        # Runs ending and starting while others still execute keep the one subscription.
        for run_id in run_ids[:10]:
            stops.unregister(run_id)
        stops.register("run-new", lambda: None)
        await asyncio.sleep(0.1)
        assert subscribers() == 1
        assert stops.listening

        for run_id in [*run_ids[10:], "run-new"]:
            stops.unregister(run_id)
        assert not stops.listening
        await _until(lambda: subscribers() == 0, what="the subscription to end with the runs")
        assert not layer._get_layer().channels  # nothing kept in the process either


class _FailingFirstJoins(InMemoryChannelLayer):
    """The in-memory layer, refusing the first two joins (a layer restarting)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.refused = 0

    async def group_add(self, group: str, channel: str) -> None:
        if self.refused < 2:
            self.refused += 1
            raise ConnectionError("the layer is restarting")
        await super().group_add(group, channel)


async def test_a_layer_that_fails_to_join_is_tried_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(stops_module, "RETRY_SECONDS", 0.01)
    layer = _FailingFirstJoins()
    monkeypatch.setattr(stops_module, "get_channel_layer", lambda: layer)
    stops = LoopStops()
    heard: list[str] = []
    stops.register("run-a", lambda: heard.append("run-a"))
    try:
        await _announce_until_heard("run-a", heard)
    finally:
        stops.unregister("run-a")
    assert layer.refused == 2
    assert "cannot listen for stops" in caplog.text


@pytest.mark.django_db(transaction=True)
async def test_a_worker_run_is_stopped_by_the_layer_before_any_heartbeat(
    redis_client: redis.Redis, model_on_the_fake: None
) -> None:
    """A run executing on a worker (relayed, not in the web's live registry) is stopped by the
    stop the web tells on the layer; the heartbeat, which would also see it, is a minute away."""
    directive = "FAKE: " + orjson.dumps({"tokens": 400, "delay_ms": 25}).decode()
    data = generate_data(thread_id="stops-layer", messages=[text_input("u1", directive)])
    request = parse_generate_input(data, {})
    # The model's settings kept (model_on_the_fake), the heartbeat a minute away.
    slow_heartbeat = {
        **settings.COPILOT_RUNTIME,
        "HEARTBEAT_SECONDS": 60.0,
        "RUN_STALE_SECONDS": 200.0,
    }
    with (
        override_settings(CHANNEL_LAYERS=_layers(REDIS_PUBSUB)),
        override_settings(COPILOT_RUNTIME=slow_heartbeat),
    ):
        prepared = await turn_prepare(user=AnonymousUser(), request=request, protocol="graphql")
        execution = asyncio.create_task(
            run_execute(
                run_id=prepared.run_id,
                thread_id=prepared.thread_id,
                request=request,
                prepared=prepared,
            )
        )
        layer = get_channel_layer()
        await _until(
            lambda: _group_channel(layer) in layer._get_layer().groups,
            what="the run's loop to listen for stops",
        )
        assert stops_for_loop().listening
        assert await run_cancel(run_id=prepared.run_id) is True

        status = await asyncio.wait_for(execution, 5)
    assert status == RunStatus.CANCELLED
    run = await Run.objects.aget(pk=prepared.run_id)
    assert (run.status, run.error_code) == (RunStatus.CANCELLED, "CANCELLED")
    assert not stops_for_loop().listening
