"""The worker's Redis transport (copilot_runtime/fastlane/kombu.py), on the suite's real Redis: it
delivers, records, acknowledges and delivers again exactly as kombu's own transport does,
with one client for its records and the JSON read once by orjson."""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from kombu import Connection, Consumer, Queue
from kombu.serialization import loads as kombu_serialization_loads
from kombu.serialization import registry
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps as kombu_dumps
from kombu.utils.json import loads as kombu_loads

from copilot_runtime.fastlane import kombu as broker
from tests.support.redis_broker import redis_test_url

TIMEOUT = 5.0


@pytest.fixture
def queue_name() -> Iterator[str]:
    """A queue of its own, whose unacknowledged records are kept under keys of its own."""
    name = f"broker-test-{uuid.uuid4().hex}"
    yield name
    client = _redis()
    try:
        client.delete(name, *_record_keys(name).values())
    finally:
        client.close()


def _record_keys(queue: str) -> dict[str, str]:
    return {
        "unacked_key": f"{queue}-unacked",
        "unacked_index_key": f"{queue}-unacked-index",
        "unacked_mutex_key": f"{queue}-unacked-mutex",
    }


def _redis() -> redis.Redis:
    return redis.Redis.from_url(redis_test_url())


def _message(
    queue: str, body: Any, *, headers: dict[str, Any] | None = None, as_text: bool = False
) -> dict[str, Any]:
    """A message as kombu's producer writes it onto a queue's list (a task message's shape);
    ``as_text``: its body as the web's own push writes it (engine/task_publish.py)."""
    text = json.dumps(body)
    return {
        "body": text if as_text else base64.b64encode(text.encode()).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": headers or {"task": "copilot.execute_run", "id": str(uuid.uuid4())},
        "properties": {
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": 0,
            "body_encoding": None if as_text else "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }


def _push(queue: str, message: dict[str, Any]) -> None:
    client = _redis()
    try:
        client.lpush(queue, kombu_dumps(message))
    finally:
        client.close()


def _receive(connection: Connection, queue: str) -> Any:
    """One message from ``queue``, unacknowledged, through the transport's BRPOP."""
    return _receive_handled(connection, queue, lambda _message: None)


def _receive_handled(connection: Connection, queue: str, handle: Any) -> Any:
    """``_receive``, the message handed to ``handle(message)`` on its way, as the worker's
    consumer hands a task message to its strategy."""
    received: list[Any] = []

    def on_message(_body: Any, message: Any) -> None:
        received.append(message)
        handle(message)

    consumer = Consumer(
        connection.default_channel,
        queues=[Queue(queue, no_declare=True)],
        callbacks=[on_message],
        accept=["json"],
    )
    with consumer:
        connection.drain_events(timeout=TIMEOUT)
    assert len(received) == 1
    return received[0]


def _record(queue: str, tag: str) -> Any:
    client = _redis()
    try:
        raw = client.hget(_record_keys(queue)["unacked_key"], tag)
    finally:
        client.close()
    return None if raw is None else kombu_loads(raw.decode())


def _connection(queue: str, transport: type = broker.Transport) -> Connection:
    return Connection(redis_test_url(), transport=transport, transport_options=_record_keys(queue))


@pytest.mark.parametrize("as_text", [False, True], ids=["base64 body", "text body"])
@pytest.mark.parametrize("transport", [broker.Transport, kombu_redis.Transport])
def test_a_message_is_delivered_and_recorded_as_kombus_own_transport_does(
    queue_name: str, transport: type, as_text: bool
) -> None:
    pushed = _message(queue_name, {"run": "r1", "history": ["x" * 5000]}, as_text=as_text)
    _push(queue_name, pushed)
    with _connection(queue_name, transport) as connection:
        message = _receive(connection, queue_name)
        assert message.decode() == {"run": "r1", "history": ["x" * 5000]}
        assert message.headers == pushed["headers"]
        tag = message.delivery_tag
        # The unacknowledged record: what kombu reads to deliver the message again.
        assert _record(queue_name, tag) == [pushed, "", queue_name]
        message.ack()
        assert _record(queue_name, tag) is None


def _indexed(queue: str, tag: str) -> bool:
    client = _redis()
    try:
        return client.zscore(_record_keys(queue)["unacked_index_key"], tag) is not None
    finally:
        client.close()


def test_a_messages_record_is_sent_before_its_handler_and_confirmed_after_it(
    queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The handler (a run task's: it hands the run to the run loop) does not wait for the
    # record's round trip, and the record is on its way before the run starts.
    steps: list[str] = []
    send, confirm = broker.QoS.send_record, broker.SentRecord.confirm

    def sending(self: Any, message: Any, tag: str) -> Any:
        steps.append("sent")
        return send(self, message, tag)

    def confirming(self: Any) -> None:
        confirm(self)
        steps.append("confirmed")

    monkeypatch.setattr(broker.QoS, "send_record", sending)
    monkeypatch.setattr(broker.SentRecord, "confirm", confirming)
    pushed = _message(queue_name, {"run": "r5"}, as_text=True)
    _push(queue_name, pushed)
    with _connection(queue_name) as connection:
        message = _receive_handled(connection, queue_name, lambda _m: steps.append("handled"))
        assert steps == ["sent", "handled", "confirmed"]
        assert _record(queue_name, message.delivery_tag) == [pushed, "", queue_name]
        assert _indexed(queue_name, message.delivery_tag)
        message.ack()
        assert _record(queue_name, message.delivery_tag) is None
        assert not _indexed(queue_name, message.delivery_tag)


def test_a_refused_record_is_raised_once_the_handler_has_run(queue_name: str) -> None:
    # The unacknowledged hash under the key of another type: Redis refuses the HSET.
    client = _redis()
    try:
        client.set(_record_keys(queue_name)["unacked_key"], "not a hash")
    finally:
        client.close()
    _push(queue_name, _message(queue_name, {"run": "r7"}, as_text=True))
    handled: list[Any] = []
    with _connection(queue_name) as connection, pytest.raises(redis.ResponseError):
        _receive_handled(connection, queue_name, handled.append)
    assert len(handled) == 1


@pytest.mark.parametrize("served_first", ["record", "settlement"])
@pytest.mark.parametrize("outcome", ["ack", "reject"])
def test_a_message_its_handler_settled_leaves_no_record(
    queue_name: str, outcome: str, served_first: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Celery's consumer acknowledges or rejects at once what it cannot execute (an unknown
    # task, a message it cannot decode): no record may outlive it, or it would come back. The
    # settlement goes on another connection than the record, and Redis may serve either first.
    if served_first == "settlement":
        send = broker.QoS.send_record

        def late(qos: Any, message: Any, tag: str) -> Any:  # sent when confirmed
            return SimpleNamespace(confirm=lambda: send(qos, message, tag).confirm())

        monkeypatch.setattr(broker.QoS, "send_record", late)
    _push(queue_name, _message(queue_name, {"run": "r6"}, as_text=True))
    with _connection(queue_name) as connection:
        message = _receive_handled(
            connection,
            queue_name,
            lambda message: message.ack() if outcome == "ack" else message.reject(),
        )
        assert _record(queue_name, message.delivery_tag) is None
        assert not _indexed(queue_name, message.delivery_tag)
    with _connection(queue_name) as connection:  # nothing was put back on the queue either
        assert connection.default_channel.client.llen(queue_name) == 0


def test_a_message_holding_kombus_marked_types_keeps_them(queue_name: str) -> None:
    when = dt.datetime(2026, 11, 28, 7, 30, tzinfo=dt.UTC)
    ident = uuid.uuid4()
    pushed = _message(
        queue_name, {"run": "r2"}, headers={"task": "t", "id": "i", "when": when, "who": ident}
    )
    _push(queue_name, pushed)
    with _connection(queue_name) as connection:
        message = _receive(connection, queue_name)
        assert message.headers["when"] == when
        assert message.headers["who"] == ident
        assert _record(queue_name, message.delivery_tag) == [pushed, "", queue_name]
        message.ack()


def test_a_rejected_message_is_delivered_again_from_its_record(queue_name: str) -> None:
    pushed = _message(queue_name, {"run": "r3"})
    _push(queue_name, pushed)
    with _connection(queue_name) as connection:
        first = _receive(connection, queue_name)
        first.requeue()
        again = _receive(connection, queue_name)
        assert again.decode() == {"run": "r3"}
        assert again.headers == {**pushed["headers"], "redelivered": True}
        again.ack()


def test_a_stopping_consumers_unacknowledged_message_is_delivered_again(queue_name: str) -> None:
    # As at a worker's warm shutdown: what it had not acknowledged goes back on the queue.
    pushed = _message(queue_name, {"run": "r4"})
    _push(queue_name, pushed)
    with _connection(queue_name) as connection:
        message = _receive(connection, queue_name)
        assert not message.delivery_info.get("redelivered")
    with _connection(queue_name) as connection:
        again = _receive(connection, queue_name)
        assert again.decode() == {"run": "r4"}
        assert again.delivery_info.get("redelivered") is True
        again.ack()


def test_the_records_and_acknowledgements_share_one_client(
    queue_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[bool] = []
    create = broker.Channel._create_client

    def counting(self: Any, asynchronous: bool = False) -> Any:
        built.append(asynchronous)
        return create(self, asynchronous=asynchronous)

    monkeypatch.setattr(broker.Channel, "_create_client", counting)
    for index in range(5):
        _push(queue_name, _message(queue_name, {"run": index}))
    with _connection(queue_name) as connection:
        for index in range(5):
            message = _receive(connection, queue_name)
            assert message.decode() == {"run": index}
            message.ack()
    # One client for BRPOP (kombu's own, cached) and one for the records, not two per message.
    assert built.count(False) == 1, built


def test_a_process_on_this_transport_keeps_kombus_own_json() -> None:
    # Task messages are a kilobyte or two (a reference to the thread's history): kombu's JSON
    # reads them, the host's messages too.
    decoder, encoder = registry._decoders["application/json"], registry._encoders["json"]
    broker.Transport(client=Connection(redis_test_url(), transport=broker.Transport))
    assert registry._decoders["application/json"] is decoder
    assert registry._encoders["json"] is encoder
    body = kombu_dumps([["r1", {"thread_pk": 7, "history": {"base": None}}], {}, {}])
    decoded = kombu_serialization_loads(body.encode(), "application/json", "utf-8")
    assert decoded == [["r1", {"thread_pk": 7, "history": {"base": None}}], {}, {}]


def test_with_the_lane_closed_the_transport_is_kombus_own(
    queue_name: str, untested_version: Callable[[str], None]
) -> None:
    untested_version("kombu")
    decoder = registry._decoders["application/json"]
    pushed = _message(queue_name, {"run": "r2"})
    _push(queue_name, pushed)
    with _connection(queue_name) as connection:
        assert type(connection.default_channel) is kombu_redis.Channel
        message = _receive(connection, queue_name)
        assert message.decode() == {"run": "r2"}
        assert _record(queue_name, message.delivery_tag) == [pushed, "", queue_name]
        message.ack()
        assert _record(queue_name, message.delivery_tag) is None
    # kombu's serializer registry is left as kombu made it.
    assert registry._decoders["application/json"] is decoder
