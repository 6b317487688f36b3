"""Where a worker's first delivery of a run claims it (copilot_runtime/runs/claim_redis.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import redis
from channels.layers import get_channel_layer
from django.test import override_settings

from copilot_runtime.runs.claim_redis import (
    KEY_PREFIX,
    claim_in_layer,
    claim_in_layer_allowed,
    claim_in_layer_announcing,
)
from tests.copilot_runtime.runs.conftest import CLAIMS_REDIS_DATABASE, claims_redis_url


async def test_the_first_claim_on_a_run_takes_it_and_every_other_is_refused(
    pubsub_layer: Any,
) -> None:
    run_id, other = str(uuid.uuid4()), str(uuid.uuid4())

    assert await claim_in_layer(run_id) is True
    assert await claim_in_layer(run_id) is False
    assert await claim_in_layer(other) is True

    shard = pubsub_layer._get_layer()._get_shard(KEY_PREFIX + run_id)
    # Kept until no fresh delivery of the task can come (PENDING_TIMEOUT_SECONDS, 30).
    assert 0 < await shard._redis.ttl(KEY_PREFIX + run_id) <= 30


async def test_on_another_channel_layer_the_claim_is_left_to_the_database() -> None:
    assert await claim_in_layer(str(uuid.uuid4())) is None  # the tests' in-memory layer


@pytest.mark.parametrize(
    ("placement", "allowed"),
    [
        pytest.param({"queued_at": 0.0}, True, id="queued now"),
        pytest.param({"queued_at": -14.0}, True, id="queued 14 s ago"),
        pytest.param({"queued_at": -16.0}, False, id="queued 16 s ago"),
        pytest.param({}, False, id="a task of an earlier version"),
        pytest.param({"queued_at": "soon"}, False, id="not a time"),
        pytest.param(None, False, id="no placement"),
    ],
)
def test_a_first_delivery_claims_in_redis_only_while_its_task_is_fresh(
    placement: dict[str, Any] | None, allowed: bool
) -> None:
    if placement is not None and isinstance(placement.get("queued_at"), float):
        placement = {"queued_at": time.time() + placement["queued_at"]}
    assert claim_in_layer_allowed(placement) is allowed


def test_fresh_is_half_the_pending_timeout() -> None:
    with override_settings(COPILOT_RUNTIME={"PENDING_TIMEOUT_SECONDS": 4}):
        assert claim_in_layer_allowed({"queued_at": time.time() - 1.5}) is True
        assert claim_in_layer_allowed({"queued_at": time.time() - 2.5}) is False


async def test_the_announcement_carrying_a_claim_goes_out_only_with_the_claim(
    pubsub_layer: Any,
) -> None:
    run_id = str(uuid.uuid4())
    channel = await pubsub_layer.new_channel()
    await pubsub_layer.group_add("claims-heard", channel)
    message = {"type": "run.batch", "events": [[1, "text_delta", {"delta": "hi"}]]}

    assert await claim_in_layer_announcing(run_id, [("claims-heard", message)]) is True
    assert await asyncio.wait_for(pubsub_layer.receive(channel), 5) == message
    # Taken: a second delivery's announcement is refused, and nothing of it is sent.
    refused = {"type": "run.batch", "events": [[1, "text_delta", {"delta": "twice"}]]}
    assert await claim_in_layer_announcing(run_id, [("claims-heard", refused)]) is False
    assert await claim_in_layer(run_id) is False
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(pubsub_layer.receive(channel), 0.3)


async def test_a_claim_whose_announcement_spans_two_redis_servers_is_taken_alone() -> None:
    hosts = [claims_redis_url(), claims_redis_url(CLAIMS_REDIS_DATABASE - 1)]
    backend = "channels_redis.pubsub.RedisPubSubChannelLayer"
    config = {"default": {"BACKEND": backend, "CONFIG": {"hosts": hosts}}}
    with override_settings(CHANNEL_LAYERS=config):
        layer = get_channel_layer()
        try:
            loop_layer = layer._get_layer()
            # A run whose claim is on one server, with a group on the other.
            run_id, group = next(
                (run_id, group)
                for run_id in (str(uuid.uuid4()) for _ in range(200))
                for group in (f"g{n}" for n in range(50))
                if loop_layer._get_shard(KEY_PREFIX + run_id)
                is not loop_layer._get_shard(loop_layer._get_group_channel_name(group))
            )
            assert await claim_in_layer_announcing(run_id, [(group, {"type": "x"})]) is None
            # Nothing was set: the claim is still to be taken.
            assert await claim_in_layer(run_id) is True
        finally:
            await layer.flush()


async def test_with_the_lane_closed_the_claim_is_left_to_the_database(
    pubsub_layer: Any, untested_version: Callable[[str], None]
) -> None:
    untested_version("channels-redis")
    run_id = str(uuid.uuid4())
    announcement = [(f"run.{run_id}", {"type": "run.batch", "events": []})]
    assert await claim_in_layer(run_id) is None
    assert await claim_in_layer_announcing(run_id, announcement) is None
    with redis.Redis.from_url(claims_redis_url()) as client:
        assert client.exists(KEY_PREFIX + run_id) == 0  # nothing was taken in Redis
