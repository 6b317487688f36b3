"""The kombu lane: kombu's Redis transport, with less work for each task message a worker
receives.

A Celery worker's consumer thread handles every run's task message on its way to the run: it
records the message as unacknowledged (kombu's emulation of acknowledgements on Redis: the
whole message written to a hash, so that a lost worker's runs are delivered again), and later
removes that record. On this transport, as kombu ships it, each record and each removal builds
a new redis-py client (costly in redis-py 8, which fills a table of its reply callbacks for
every client: redis/redis-py#3624). Here one client serves a channel's records and
removals (a redis-py client is safe to share across threads: each command takes a connection
from the pool). Messages are decoded and recorded by kombu's own JSON: a run's task carries a
reference to its thread's history, not the history (copilot_runtime/runs/task_history.py),
and is a kilobyte or two.

A consumed message's record is sent before its handler runs, as kombu writes it, but its
reply is read after the handler has returned. The record is a round trip to Redis on the
consumer thread, between the message's arrival and its handler, and a run task's handler only
hands the run to the run loop (copilot_runtime/fastlane/celery.py):
the model is now asked during that round trip. What a worker lost early loses is unchanged: the
record is on its way to Redis before the run starts. An acknowledgement the handler asks for is
carried out by the consumer's own loop after the reply; a message the handler acknowledged or
rejected itself (on another connection, which Redis may serve first) has its record removed
once the reply is in.

The standalone site sets it as Celery's ``broker_transport`` for a single ``redis://`` or
``rediss://`` broker (copilot_runtime/site/settings.py), by its public name
``copilot_runtime.broker:Transport``; a host project may set the same. It reaches into the
transport's own names (the QoS's ``_delivered``, ``_dirty`` and ``_remove_from_indices``, the
channel's ``_create_client``, the connection's ``_callbacks``): with the lane closed, the
transport's channels are kombu's own.

Every message the worker consumes through this transport takes this way, the host's own tasks
too: the record is written as kombu writes it, and its reply is read after the handler instead
of before. docs/production.md ("The fast lane") says so to a host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps as kombu_dumps
from redis.exceptions import ResponseError

from copilot_runtime.fastlane import lane_open


def record_json(raw: dict[str, Any], exchange: str, routing_key: str) -> str:
    """The unacknowledged record of a message, as kombu's QoS writes it."""
    return kombu_dumps([raw, exchange, routing_key])


class QoS(kombu_redis.QoS):
    def append(self, message: Any, delivery_tag: str) -> None:
        """kombu's order, for what is not consumed through ``Channel.basic_consume`` (a
        ``basic_get``): recorded, then delivered."""
        self.record(message, delivery_tag)
        # The virtual QoS's own bookkeeping (kombu's Redis QoS calls it the same way).
        kombu_redis.virtual.QoS.append(self, message, delivery_tag)

    def pending(self, delivery_tag: str) -> bool:
        """Delivered, and neither acknowledged nor rejected yet."""
        return delivery_tag in self._delivered and delivery_tag not in self._dirty

    def record(self, message: Any, delivery_tag: str) -> None:
        """Write the message's unacknowledged record, from which it is delivered again."""
        self.send_record(message, delivery_tag).confirm()

    def send_record(self, message: Any, delivery_tag: str) -> SentRecord:
        """``record``'s transaction, sent; its reply is read by ``SentRecord.confirm``."""
        delivery = message.delivery_info
        record = record_json(message._raw, delivery["exchange"], delivery["routing_key"])
        with self.channel.conn_or_acquire() as client:
            pool = client.connection_pool
        connection = pool.get_connection()
        commands = [
            ("MULTI",),
            ("ZADD", self.unacked_index_key, kombu_redis.time(), delivery_tag),
            ("HSET", self.unacked_key, delivery_tag, record),
            ("EXEC",),
        ]
        try:
            connection.send_packed_command(connection.pack_commands(commands))
        except BaseException:
            connection.disconnect()
            pool.release(connection)
            raise
        return SentRecord(pool, connection, replies=len(commands))

    def remove_record(self, delivery_tag: str) -> None:
        self._remove_from_indices(delivery_tag).execute()


class SentRecord:
    """A record's transaction on its way: ``confirm`` reads its replies (raising what Redis
    refused) and gives the connection back to its pool."""

    def __init__(self, pool: Any, connection: Any, *, replies: int) -> None:
        self._pool = pool
        self._connection = connection
        self._replies = replies

    def confirm(self) -> None:
        try:
            replies = [self._connection.read_response() for _ in range(self._replies)]
        except BaseException:
            self._connection.disconnect()
            raise
        finally:
            self._pool.release(self._connection)
        executed = replies[-1]
        if not isinstance(executed, list):
            raise ResponseError(f"recording a delivered message: EXEC answered {executed!r}")
        for reply in executed:
            if isinstance(reply, Exception):
                raise reply


class Channel(kombu_redis.Channel):
    QoS = QoS
    _shared_client: Any = None

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        if client:
            yield client
            return
        shared = self._shared_client
        # A new pool (kombu drops its pools on a connection error) gets a client of its own.
        if shared is None or shared.connection_pool is not self.pool:
            shared = self._shared_client = self._create_client()
        yield shared

    def basic_consume(self, queue: str, *args: Any, **kwargs: Any) -> Any:
        # kombu's own (args: no_ack, callback, consumer_tag), with the queue's delivery
        # callback replaced by one that reads the record's reply after the handler.
        consumed = super().basic_consume(queue, *args, **kwargs)
        no_ack, callback = _consume_arguments(args, kwargs)
        if not no_ack:
            self.connection._callbacks[queue] = self._recorded_after(callback)
        return consumed

    def _recorded_after(self, callback: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def deliver(raw_message: Any) -> Any:
            message = self.Message(raw_message, channel=self)
            tag = message.delivery_tag
            qos = self.qos
            sent = qos.send_record(message, tag)
            kombu_redis.virtual.QoS.append(qos, message, tag)
            try:
                return callback(message)
            finally:
                sent.confirm()
                if not qos.pending(tag):
                    qos.remove_record(tag)

        return deliver


def _consume_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any]:
    """``basic_consume``'s no_ack and callback, given by position or by name."""
    named = dict(zip(("no_ack", "callback", "consumer_tag"), args, strict=False))
    named.update(kwargs)
    return bool(named["no_ack"]), named["callback"]


class Transport(kombu_redis.Transport):
    Channel = Channel

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not lane_open("kombu"):
            # kombu's own channels (its virtual transport makes each with ``self.Channel``).
            self.Channel = kombu_redis.Channel
