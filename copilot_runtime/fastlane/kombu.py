"""The kombu lane: kombu's Redis transport, with less work for each task message a worker
receives.

A Celery worker's consumer thread handles every run's task message on its way to the run: it
decodes the message, records it as unacknowledged (kombu's emulation of acknowledgements on
Redis: the whole message written to a hash, so that a lost worker's runs are delivered
again), and later removes that record. On this transport, as kombu 5.6 ships it:

- each record and each removal builds a new redis-py client (about 100 µs in redis-py 8,
  which fills a table of its reply callbacks for every client: redis/redis-py#3624);
- the message is decoded, then written again for its record, with the standard library's
  JSON: about 0.2 ms each for a message carrying a 40-message history.

Here one client serves a channel's records and removals (a redis-py client is safe to share
across threads: each command takes a connection from the pool), and a message of plain JSON
is read with orjson and recorded as the very bytes it was read from. A task's body, which
Celery decodes twice, is read with orjson too, through kombu's serializer registry (a process
using this transport decodes every ``json`` body with ``json_loads``). A message holding
kombu's own marked types (``__type__``: dates, UUIDs, decimals a task put in its headers), NaN
or an integer past 64 bits is read and written by kombu's JSON as before. The record is the
same JSON value either way: kombu reads it back to deliver the message again
(tests/copilot_runtime/test_broker.py, on a real Redis).

A consumed message's record is sent before its handler runs, as kombu writes it, but its
reply is read after the handler has returned. The record is a round trip to Redis on the
consumer thread (0.43 ms at one conversation, between the message's arrival and its handler),
and a run task's handler only hands the run to the run loop (copilot_runtime/fastlane/celery.py):
the model is now asked during that round trip. What a worker lost early loses is unchanged: the
record is on its way to Redis before the run starts. An acknowledgement the handler asks for is
carried out by the consumer's own loop after the reply; a message the handler acknowledged or
rejected itself (on another connection, which Redis may serve first) has its record removed
once the reply is in.

The standalone site sets it as Celery's ``broker_transport`` for a single ``redis://`` or
``rediss://`` broker (copilot_runtime/settings.py), by its public name
``copilot_runtime.broker:Transport``; a host project may set the same. It reaches into the
transport's own methods (``_brpop_read``, the QoS's ``_delivered``, ``_dirty`` and
``_remove_from_indices``, the channel's ``_create_client``, ``_queue_cycle`` and ``_in_poll``,
the connection's ``_callbacks`` and ``_deliver``): with the lane closed, the transport's
channels are kombu's own and the serializer registry is left alone.

Every message the worker consumes through this transport takes this way, the host's own tasks
too: the record is written as kombu writes it, and its reply is read after the handler instead
of before. docs/production.md ("The fast lane") says so to a host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from kombu.serialization import registry
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps as kombu_dumps
from kombu.utils.json import loads as kombu_loads
from redis.exceptions import ResponseError

from copilot_runtime.fastlane import lane_open

# kombu's JSON marks the values plain JSON cannot hold as {"__type__": ..., "__value__": ...}.
_MARKED = b'"__type__"'
_MARKED_TEXT = _MARKED.decode()
_NOT_PLAIN = object()


class PlainMessage(dict[str, Any]):
    """A message read with orjson: JSON's own types only, so orjson writes it back alike.
    ``text``: the JSON it was read from, if any."""

    __slots__ = ("text",)

    def __init__(self, value: dict[str, Any], text: bytes = b"") -> None:
        super().__init__(value)
        self.text = text


def _plain(data: bytes | str) -> Any:
    """What orjson reads from ``data`` where kombu's JSON reads the same, else ``_NOT_PLAIN``."""
    if (_MARKED_TEXT if isinstance(data, str) else _MARKED) in data:
        return _NOT_PLAIN
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _NOT_PLAIN  # what only the standard library reads (NaN, lone surrogates)
    return value if _exact(value) else _NOT_PLAIN


# orjson reads an integer beyond 64 bits as a float; the standard library keeps it exact.
_INEXACT = float(2**63)


def _exact(value: Any) -> bool:
    """Whether orjson read ``value`` as the standard library would: no float that may have
    been a longer integer (a task message holds few numbers; its history is one string)."""
    if type(value) is float:
        return abs(value) < _INEXACT
    if type(value) is dict:
        return all(_exact(item) for item in value.values())
    if type(value) is list:
        return all(_exact(item) for item in value)
    return True


def message_from_bytes(data: bytes) -> dict[str, Any]:
    """A message taken from a queue, as kombu's JSON reads it."""
    value = _plain(data)
    if type(value) is dict:
        return PlainMessage(value, data)
    return kombu_loads(data.decode())


def json_loads(data: bytes | bytearray | memoryview | str) -> Any:
    """kombu's JSON decoder, reading with orjson what it reads alike (``_plain``)."""
    if not isinstance(data, bytes | str):
        data = bytes(data)
    value = _plain(data)
    return kombu_loads(data) if value is _NOT_PLAIN else value


def use_json_loads() -> None:
    """Decode this process's JSON message bodies with ``json_loads`` (kombu's serializer
    registry, where kombu registers its own ``json``): a worker decodes each task's body
    twice, in Celery's consumer and again in the pool's tracer, about 110 µs each with the
    standard library for a 40-message history against 23 with orjson."""
    registry.register(
        "json", kombu_dumps, json_loads, content_type="application/json", content_encoding="utf-8"
    )


def record_json(raw: dict[str, Any], exchange: str, routing_key: str) -> bytes | str:
    """The unacknowledged record of a message: the JSON kombu's QoS writes, read back alike.

    A message read from its text (``message_from_bytes``) is recorded with that text: kombu
    records a message as it was delivered, before anything reads it (its channel's consume
    callback, then ``QoS.append``), and the text is the message. Writing the message again
    cost the consumer thread about a tenth of its time (py-spy, a 40-message history)."""
    if type(raw) is PlainMessage:
        if raw.text:
            route = orjson.dumps([exchange, routing_key])  # '["","q"]': its items follow
            return b"".join((b"[", raw.text, b",", route[1:]))
        return orjson.dumps([raw, exchange, routing_key])
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

    def _brpop_read(self, **options: Any) -> bool:
        # kombu's own, but for the message's decoding (``message_from_bytes``).
        try:
            try:
                dest__item = self.client.parse_response(self.client.connection, "BRPOP", **options)
            except self.connection_errors:
                # As kombu does: the next iteration connects again.
                self.client.connection.disconnect()
                raise
            if dest__item:
                dest, item = dest__item
                dest = kombu_redis.bytes_to_str(dest).rsplit(self.sep, 1)[0]
                self._queue_cycle.rotate(dest)
                if isinstance(item, str):
                    item = item.encode()
                self.connection._deliver(message_from_bytes(item), dest)
                return True
            raise kombu_redis.Empty()
        finally:
            self._in_poll = None


def _consume_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, Any]:
    """``basic_consume``'s no_ack and callback, given by position or by name."""
    named = dict(zip(("no_ack", "callback", "consumer_tag"), args, strict=False))
    named.update(kwargs)
    return bool(named["no_ack"]), named["callback"]


class Transport(kombu_redis.Transport):
    Channel = Channel

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if lane_open("kombu"):
            use_json_loads()
        else:
            # kombu's own channels (its virtual transport makes each with ``self.Channel``).
            self.Channel = kombu_redis.Channel
