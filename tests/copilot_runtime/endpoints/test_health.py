"""``/healthz`` (alive) and ``/readyz`` (what the process would use for its next request: the
database on the shared thread and the turn store, the channel layer, the broker)."""

from __future__ import annotations

import os

import pytest
from django.test import Client, override_settings

CLOSED_REDIS_PORT_URL = "redis://127.0.0.1:1/0"


def redis_layer(url: str) -> dict[str, object]:
    return {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [url]},
        }
    }


def test_healthz_answers_ok_without_touching_anything(client: Client) -> None:
    response = client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
@override_settings(REDIS_URL="")
def test_readyz_is_ok_with_the_database(client: Client) -> None:
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
@override_settings(CHANNEL_LAYERS=redis_layer(CLOSED_REDIS_PORT_URL))
def test_readyz_is_503_when_the_channel_layer_is_down(client: Client) -> None:
    response = client.get("/readyz")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["problems"] == ["redis unavailable"]
    assert "127.0.0.1:1" not in response.content.decode()


@pytest.mark.django_db
def test_readyz_is_ok_with_a_live_channel_layer(client: Client) -> None:
    redis_url = os.environ.get("TEST_REDIS_URL")
    if not redis_url:
        pytest.fail("TEST_REDIS_URL is not set (run the suite with scripts/test.sh)")

    with override_settings(CHANNEL_LAYERS=redis_layer(redis_url)):
        response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
