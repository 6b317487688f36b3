"""The suite's Redis (started by scripts/test.sh) as a Celery broker for in-process tests."""

from __future__ import annotations

import os

import pytest
from celery import Celery
from kombu.message import Message


def redis_test_url() -> str:
    url = os.environ.get("TEST_REDIS_URL")
    if not url:
        pytest.fail("TEST_REDIS_URL is not set: run the suite with scripts/test.sh (make test)")
    return url


# How long a test waits for a message it has just sent.
RECEIVE_TIMEOUT_SECONDS = 5.0


def next_delivered(app: Celery, *, acknowledge: bool) -> Message:
    """The next message on ``app``'s default queue, as a worker's consumer receives it. Not
    acknowledged, it goes back on the queue when the connection closes (as the message of a
    worker that stopped or was lost before its task ended): read again, it is a redelivery."""
    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue(app.conf.task_default_queue)
        message = queue.get(timeout=RECEIVE_TIMEOUT_SECONDS)
        if acknowledge:
            message.ack()
        queue.close()
    return message
