"""A worker's late-acknowledged message through a lost Redis connection
(copilot_runtime/runs/worker_recovery.py): Celery's own handling of the loss, run on a stand-in for
its consumer, with kombu's Redis transport and the runtime's, against a Redis of the test's own
that stops under a delivered, unacknowledged message and starts again with its data."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from celery import Celery
from celery.worker.consumer.consumer import Consumer as CeleryConsumer
from kombu import Connection, Consumer, Exchange, Producer, Queue
from kombu.asynchronous import Hub
from kombu.message import Message

from copilot_runtime.runs import worker_recovery
from tests.support.redis_server import RedisServer, running_redis

# Celery's consumer lets kombu's ack_log_error log a connection error and carry on.
logger = logging.getLogger(__name__)

TRANSPORTS = ["redis", "copilot_runtime.broker:Transport"]  # kombu's own, the runtime's
QUEUE = Queue("celery", Exchange("celery", "direct"), "celery")
# A fan-out queue on a channel of its own, as Celery's remote control (pidbox) has one.
BROADCAST = Queue("worker-recovery.pidbox", Exchange("worker-recovery", "fanout"), auto_delete=True)
WAIT_SECONDS = 10.0
CELERY_5_7 = tuple(int(part) for part in metadata.version("celery").split(".")[:2]) >= (5, 7)

pytestmark = pytest.mark.filterwarnings(
    # Celery's handling warns that Celery 6 cancels late-acknowledged tasks on a loss.
    "ignore::celery.exceptions.CPendingDeprecationWarning"
)


class Worker:
    """What a Celery worker's consumer holds for its task messages (a connection on an event
    loop, its task consumer and a broadcast consumer) and what Celery's handling of a lost
    connection (``on_connection_error_after_connected``, Celery's own) reads."""

    on_connection_error_after_connected = CeleryConsumer.on_connection_error_after_connected

    def __init__(self, url: str, transport: str) -> None:
        self.url = url
        self.transport = transport
        self.app = Celery("worker-recovery", set_as_current=False)  # Celery's defaults
        self.prefetch_multiplier = 1
        self.max_prefetch_count = self.initial_prefetch_count = 2
        self.qos_global: bool | None = None
        self._maximum_prefetch_restored = True
        self.hub = Hub()
        self.received: list[Message] = []
        self.connections: list[Connection] = []
        # The connection's error, once lost.
        self.error: BaseException | None = None
        self.connect()

    def connect(self) -> None:
        """Connect again, as Celery's consumer does after a loss: a new connection and task
        consumer, polled by the same event loop."""
        self.hub.reset()
        # A BRPOP that waits longer than any test: sent, it stays in flight until Redis stops.
        connection = self.connection = Connection(
            self.url, transport=self.transport, transport_options={"polling_interval": 60}
        )
        self.connections.append(connection)
        # What Celery's consumer gives kombu's ack_log_error to log instead of raising.
        self.connection_errors = connection.connection_errors
        channel = connection.default_channel
        channel.basic_qos(0, self.max_prefetch_count, False)
        self.task_consumer = Consumer(
            channel, [QUEUE], callbacks=[self._receive], no_ack=False, auto_declare=True
        )
        broadcast = Consumer(connection.channel(), [BROADCAST], no_ack=True)
        connection.transport.register_with_event_loop(connection.connection, self.hub)
        self.task_consumer.consume()
        broadcast.consume()
        self.loop = self.hub.create_loop()

    def _receive(self, _body: Any, message: Message) -> None:
        self.received.append(message)

    def poll_until(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            next(self.loop)

    def lose_connection(self) -> BaseException:
        """Poll until the connection breaks; the error Celery's consumer would handle."""
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            try:
                next(self.loop)
            except self.connection.connection_errors as error:
                return error
        raise AssertionError("the worker did not notice that Redis stopped")

    def close(self) -> None:
        for connection in self.connections:
            try:
                connection.release()
            except Exception:  # a connection the test broke
                logger.debug("closing a broken connection", exc_info=True)
        self.hub.close()


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with running_redis(tmp_path) as server:
        yield server


def publish(url: str, body: dict[str, Any]) -> None:
    with Connection(url) as connection:
        Producer(connection.default_channel).publish(
            body, exchange=QUEUE.exchange, routing_key=QUEUE.routing_key, declare=[QUEUE]
        )


def restart_keeping_data(server: RedisServer) -> None:
    """Stop Redis, its data saved: a worker's unacknowledged records outlive the restart."""
    client = redis.Redis.from_url(server.url)
    try:
        client.shutdown(save=True)
    finally:
        client.close()
    server.stop()


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# How the worker learns that Redis stopped: its event loop reads the end of a connection (the
# task channel's or the broadcast channel's, whichever comes first), or another channel of
# its connection fails while the task channel waits on its BRPOP (Celery's remote control did,
# in the worker of tests/e2e/celery/test_celery_outages.py).
NOTICED = ["polled", "elsewhere"]


@pytest.fixture(params=NOTICED)
def noticed(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def worker_in_flight(
    redis_server: RedisServer, transport: str, noticed: str
) -> Iterator[tuple[Worker, Message]]:
    """A worker holding one delivered, unacknowledged message (its task in flight) and asking
    Redis for the next one, its connection lost to a Redis that stopped (its data saved)."""
    publish(redis_server.url, {"run": "in flight"})
    worker = Worker(redis_server.url, transport)
    try:
        worker.poll_until(lambda: bool(worker.received), "the message")
        (message,) = worker.received
        worker.received.clear()
        next(worker.loop)  # the next BRPOP sent, as a worker's loop does while its task runs
        restart_keeping_data(redis_server)
        if noticed == "polled":
            worker.error = worker.lose_connection()
        else:
            worker.error = redis.exceptions.ConnectionError("Connection closed by server.")
        yield worker, message
    finally:
        if redis_server.process is None:
            redis_server.start()
        worker.close()


def unacknowledged(url: str) -> list[bytes]:
    client = redis.Redis.from_url(url)
    try:
        return list(client.hkeys("unacked"))
    finally:
        client.close()


def queued(url: str) -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(client.llen("celery"))
    finally:
        client.close()


def test_the_task_in_flight_is_acknowledged_once_on_the_next_connection(
    worker_in_flight: tuple[Worker, Message], redis_server: RedisServer
) -> None:
    worker, message = worker_in_flight
    worker_recovery.keep_deliveries_through_reconnects(sender=worker)

    worker.on_connection_error_after_connected(worker.error)
    redis_server.start()
    assert unacknowledged(redis_server.url) == [message.delivery_tag.encode()]
    worker.connect()
    next(worker.loop)  # the new connection polled, as a worker's is when its task ends

    # The task ends: its acknowledgement removes the message's record, which nothing put back.
    message.ack_log_error(logger, worker.connection_errors)
    assert message.acknowledged
    assert unacknowledged(redis_server.url) == []
    assert queued(redis_server.url) == 0
    # And the worker goes on asking for messages, one BRPOP after another (kombu 5.6 stopped
    # polling a connection one of whose channels disconnected).
    for index in range(2):
        publish(redis_server.url, {"run": f"next {index}"})
    worker.poll_until(lambda: len(worker.received) == 2, "the next messages")
    assert [message.payload for message in worker.received] == [
        {"run": "next 0"},
        {"run": "next 1"},
    ]


def test_a_task_rejected_for_redelivery_goes_back_on_its_queue(
    worker_in_flight: tuple[Worker, Message], redis_server: RedisServer
) -> None:
    worker, message = worker_in_flight
    worker_recovery.keep_deliveries_through_reconnects(sender=worker)

    worker.on_connection_error_after_connected(worker.error)
    redis_server.start()
    worker.connect()
    message.reject_log_error(logger, worker.connection_errors, requeue=True)

    assert unacknowledged(redis_server.url) == []
    worker.poll_until(lambda: bool(worker.received), "the message again")
    (again,) = worker.received
    assert again.payload == {"run": "in flight"}
    assert again.delivery_info.get("redelivered") is True


def test_an_acknowledgement_before_the_next_connection_is_a_logged_connection_error(
    worker_in_flight: tuple[Worker, Message],
    redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker, message = worker_in_flight
    worker_recovery.keep_deliveries_through_reconnects(sender=worker)
    worker.on_connection_error_after_connected(worker.error)
    # Celery's consumer holds the lost connection's task consumer until it connects again.

    message.ack_log_error(logger, worker.connection_errors)

    assert not message.acknowledged
    assert "Couldn't ack" in caplog.text
    redis_server.start()
    assert unacknowledged(redis_server.url) == [message.delivery_tag.encode()]


@pytest.mark.skipif(not CELERY_5_7, reason="Celery 5.6 only collects the lost connection")
@pytest.mark.parametrize("noticed", ["elsewhere"])
def test_without_the_recovery_celery_5_7_loses_the_worker(
    worker_in_flight: tuple[Worker, Message], redis_server: RedisServer
) -> None:
    """The cause, on the installed Celery and kombu: the lost channel's close, or the task's
    acknowledgement after it, reaches a transport Celery's close detached from its connection
    (an AttributeError, which neither ignores: the worker stops)."""
    worker, message = worker_in_flight

    # Either step raises: the close where the channel kept its BRPOP in flight, else the ack.
    with pytest.raises(AttributeError, match="NoneType"):
        worker.on_connection_error_after_connected(worker.error)
        redis_server.start()
        worker.connect()
        message.ack_log_error(logger, worker.connection.connection_errors)


def test_a_sender_without_celerys_handling_is_left_alone() -> None:
    sender = SimpleNamespace(pool=None)  # as the stand-in consumers of test_tasks.py

    worker_recovery.keep_deliveries_through_reconnects(sender=sender)

    assert vars(sender) == {"pool": None}


def test_the_handling_is_wrapped_once() -> None:
    handled: list[BaseException] = []
    sender = SimpleNamespace(task_consumer=None, on_connection_error_after_connected=handled.append)

    worker_recovery.keep_deliveries_through_reconnects(sender=sender)
    wrapped = sender.on_connection_error_after_connected
    worker_recovery.keep_deliveries_through_reconnects(sender=sender)
    error = ConnectionError("lost")
    sender.on_connection_error_after_connected(error)

    assert sender.on_connection_error_after_connected is wrapped
    assert handled == [error]  # no Redis channel to orphan: Celery's handling alone
