"""A worker's late-acknowledged task messages, kept through a lost Redis connection.

A run task is acknowledged when its run ends (``acks_late``), so a worker whose broker
connection breaks mid-run still holds the run's message, unacknowledged, on the channel of the
lost connection. On kombu's Redis transport that channel emulates acknowledgements: each
delivered message is recorded in Redis (the ``unacked`` hash) until the worker acknowledges it,
and the channel, when it closes, puts back on its queue whatever it still holds.

Celery 5.7's consumer closes the lost connection before connecting again (celery 5.7.0,
celery/worker/consumer/consumer.py:480-487, celery/celery#10242); 5.6 only collected it
(``connection.collect()``, :476). On kombu's Redis transport the two together stop the worker
when a late-acknowledged task is in flight and the loss shows on another channel first
(Celery's remote control, in tests/e2e/celery/test_celery_outages.py) while the task channel
waits on its BRPOP:

- ``collect()`` (kombu 5.7.0, kombu/connection.py:432-452) closes the task channel
  (connection.py:412), which raises on the dead connection, reading the pending BRPOP reply,
  before the channel counts as closed (kombu/transport/redis.py:1894); the transport's close
  of the other channels (connection.py:415) stops at the remote control's, whose fan-out
  queue cannot be deleted (redis.py:1906); then ``collect()`` detaches the transport from its
  connection (connection.py:450 and :429, ``transport.client = None``);
- ``close()`` (connection.py:454-457 and :420-423) closes the task channel once more, which
  now gets as far as putting back its unacknowledged messages (kombu/transport/virtual/
  base.py:806 and :300, kombu/transport/redis.py:494) through a new Redis pool built from
  ``transport.client`` (redis.py:2094, :2065, :1959): ``AttributeError: 'NoneType' object has
  no attribute 'hostname'``, which ``ignore_errors`` lets through (it ignores connection
  errors only), and Celery stops the worker ("Unrecoverable error", celery/worker/
  worker.py:271).

Making that close put nothing back is not enough: the close then completes, and the run's
acknowledgement, sent when the run ends, reaches a channel without a transport (virtual/
base.py:979): the same AttributeError, on the consumer's event loop. And had Redis been
reachable during the close, it would have put the message back on its queue while its run
went on here: delivered again, though the run task stores nothing the second time.

So, before Celery handles a lost connection, the channel of the worker's task consumer is
orphaned:

- it puts nothing back when it closes (``do_restore``, kombu's switch for that). Its
  messages stay recorded in Redis, unacknowledged, as on a worker that is still executing
  them: which it is;
- its acknowledgements and rejections go to the channel the consumer takes its task messages
  on at that moment, the next connection's (Celery carries them out on the consumer's event
  loop, which runs only while connected). Redis's record of a delivery is the same whichever
  channel of the broker removes it: the acknowledgement removes it, a rejection with
  ``requeue`` puts the message back from it.

A run in flight thus ends and is acknowledged once, as without the outage. Where Redis still
cannot be reached then, the acknowledgement is logged as failed and the record stays: kombu
delivers the message again after the visibility timeout (a redelivered run task stores
nothing), as with any acknowledgement lost with a worker. A message Celery had reserved but
not started when the connection broke, which it drops then, is not put back at once either:
it comes back after the visibility timeout, as it did with Celery 5.6 (with the runtime's
prefetch multiplier of 1, a worker holds next to none).

Registered for every worker by copilot_runtime/tasks.py (the ``worker_ready`` signal, whose
sender is the consumer). Public names only, no underscored ones: Celery's consumer
``task_consumer`` and its ``on_connection_error_after_connected`` method (replaced on the
consumer instance by a wrapper that calls it), kombu's ``Consumer.channel`` and the virtual
channel's ``closed``, ``do_restore``, ``basic_ack`` and ``basic_reject`` (the last two replaced
on the lost channel instance).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from weakref import WeakSet

from kombu.transport.redis import Channel as RedisChannel

logger = logging.getLogger(__name__)

# Marks the consumer method this module wrapped, so that a second ``worker_ready`` for the same
# consumer does not wrap it twice.
_WRAPPED = "copilot_runtime_keeps_deliveries"


class NotConnected(ConnectionError):
    """The worker has no broker connection to acknowledge a message on (a connection error, so
    that kombu's ``ack_log_error`` logs it instead of stopping the consumer)."""


class LiveChannelAcks:
    """Acknowledges and rejects deliveries of lost connections on the channel ``consumer``
    takes its task messages on now.

    That channel, not one opened for the purpose: with kombu 5.6, closing any channel of the
    consumer's connection stops the event loop polling that connection (the transport takes its
    ``on_poll_start`` off the loop on any disconnect: kombu 5.6.2, kombu/transport/redis.py:
    1365-1375), and a channel kept open would gather every tag acknowledged on it (kombu's QoS
    holds one until the channel's next delivery). The task channel holds the tag until its own
    next delivery, counting one unacknowledged delivery fewer meanwhile: the slot of the task
    that ended."""

    def __init__(self, consumer: Any) -> None:
        self._consumer = consumer
        self.orphans: WeakSet[Any] = WeakSet()

    def _channel(self) -> Any:
        task_consumer = getattr(self._consumer, "task_consumer", None)
        channel = getattr(task_consumer, "channel", None)
        # Between a loss and the next connection the task consumer still holds the lost
        # channel (acknowledgements wait for the next connection's event loop, but a worker
        # stopping then runs them at once).
        if channel is None or channel.closed or channel in self.orphans:
            raise NotConnected("the worker is not connected to the broker")
        return channel

    def ack(self, delivery_tag: str, multiple: bool = False) -> None:
        self._channel().basic_ack(delivery_tag, multiple=multiple)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        self._channel().basic_reject(delivery_tag, requeue=requeue)


def orphan_task_channel(consumer: Any, acks: LiveChannelAcks) -> bool:
    """Make the channel of ``consumer``'s task consumer (a kombu Redis channel) put nothing
    back when it closes, and carry its acknowledgements and rejections out through ``acks``.
    False where there is no such channel (another transport: its broker redelivers by
    itself)."""
    task_consumer = getattr(consumer, "task_consumer", None)
    channel = getattr(task_consumer, "channel", None)
    if not isinstance(channel, RedisChannel):
        return False
    acks.orphans.add(channel)
    channel.do_restore = False
    # Instance attributes: kombu's Message.ack and Message.reject call these on the channel the
    # message came from (a Celery request holds the message, our strategy its ack callback).
    channel.basic_ack = acks.ack
    channel.basic_reject = acks.reject
    return True


def keep_deliveries_through_reconnects(sender: Any, **_: Any) -> None:
    """``worker_ready`` handler: ``sender`` (the worker's consumer, which lives as long as the
    worker) orphans its task channel before handling each broker connection it loses."""
    consumer = sender
    handle_loss: Callable[[BaseException], None] | None = getattr(
        consumer, "on_connection_error_after_connected", None
    )
    if handle_loss is None or getattr(handle_loss, _WRAPPED, False):
        return
    acks = LiveChannelAcks(consumer)

    def on_connection_error_after_connected(error: BaseException) -> None:
        if orphan_task_channel(consumer, acks):
            logger.info(
                "Broker connection lost: the task messages it delivered stay with their "
                "tasks, acknowledged on the next connection"
            )
        handle_loss(error)

    setattr(on_connection_error_after_connected, _WRAPPED, True)
    consumer.on_connection_error_after_connected = on_connection_error_after_connected
