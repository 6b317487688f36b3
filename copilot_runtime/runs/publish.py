"""Queueing a run on the Celery workers without leaving the event loop, on a Redis broker.

Celery's ``send_task`` is synchronous: from the web's event loop it costs a thread hop, then
kombu's producer (a pooled connection, the queue's declaration, the publish), on the way of
every turn's first token. Its message, though, is one ``LPUSH`` of one JSON document onto the
queue's
list. So where nothing else is expected of the publish, the run task's message is built with
Celery's and kombu's own functions (the task message, the route, the body's serialisation)
and pushed with the async Redis client: one round trip on the loop.

Anything else takes Celery's own way (``fast_publish_possible``): a Celery or kombu release
the fast lane was not tested with (copilot_runtime/fastlane: the message copies theirs),
another broker, a key prefix, a route that is not a plain queue, a priority, compression,
another serializer or task protocol, sent events, or receivers of the publish signals (tracing
integrations listen to them). The message is compared with kombu's own in
tests/copilot_runtime/engine/.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

import orjson

from copilot_runtime.fastlane import lane_open
from copilot_runtime.fastlane.redis import command_at_once

if TYPE_CHECKING:  # Celery and kombu are imported on use: only the celery executor needs them
    from celery import Celery

_DIRECT = "direct"


# (app, task name) -> (the app, the publish signals' receivers then, the answer).
_DECIDED: dict[tuple[int, str], tuple[Celery, int, bool]] = {}


def fast_publish_possible(app: Celery, *, name: str) -> bool:
    """Whether ``publish_task`` writes what ``send_task`` would, for task ``name``. Decided
    once per app (its configuration is settled when it serves), again when a receiver of
    the publish signals comes or goes."""
    from celery import signals as celery_signals

    receivers = len(celery_signals.before_task_publish.receivers) + len(
        celery_signals.after_task_publish.receivers
    )
    decided = _DECIDED.get((id(app), name))
    if decided is not None and decided[0] is app and decided[1] == receivers:
        return decided[2]
    possible = _fast_publish_possible(app, name=name)
    _DECIDED[(id(app), name)] = (app, receivers, possible)
    return possible


def _fast_publish_possible(app: Celery, *, name: str) -> bool:
    from celery import signals as celery_signals

    if not (lane_open("celery") and lane_open("kombu")):
        return False
    conf = app.conf
    url = str(conf.broker_write_url or conf.broker_url or "")
    if not url.startswith(("redis://", "rediss://")) or ";" in url:  # one broker, Redis
        return False
    options = conf.broker_transport_options or {}
    if options.get("global_keyprefix") or options.get("sep") or options.get("priority_steps"):
        return False
    if conf.task_protocol != 2 or conf.task_serializer != "json" or conf.task_compression:
        return False
    if conf.task_send_sent_event or conf.task_always_eager:
        return False
    if conf.task_default_delivery_mode not in ("persistent", 2):
        return False
    for signal in (celery_signals.before_task_publish, celery_signals.after_task_publish):
        if signal.receivers:
            return False
    route = _route(app, name)
    queue = route.get("queue")
    return (
        queue is not None
        and not route.get("exchange")
        and not route.get("routing_key")
        and route.get("priority") in (None, 0)
        and queue.exchange is not None
        and queue.exchange.type == _DIRECT
        and queue.exchange.delivery_mode in (None, 2)
        and not queue.queue_arguments
    )


# (app, one task, another) -> (the app, whether both go the same way).
_SAME_ROUTE: dict[tuple[int, str, str], tuple[Celery, bool]] = {}


def same_route(app: Celery, name: str, other: str) -> bool:
    """Whether tasks ``name`` and ``other`` are routed alike (one queue, the same options), so
    either may carry what the other would. Decided once per app."""
    decided = _SAME_ROUTE.get((id(app), name, other))
    if decided is not None and decided[0] is app:
        return decided[1]
    same = _route(app, name) == _route(app, other)
    _SAME_ROUTE[(id(app), name, other)] = (app, same)
    return same


def _route(app: Celery, name: str) -> dict[str, Any]:
    return dict(app.amqp.router.route({}, name, None, None))


def task_message(
    app: Celery,
    *,
    name: str,
    args: list[Any],
    argsrepr: str,
    time_limit: float | None,
    task_id: str | None = None,
) -> tuple[str, bytes]:
    """(the queue's key, the message) that ``send_task`` would push for these arguments: the
    same JSON values (written by orjson, which kombu's JSON reads alike), but for the body,
    which goes as text rather than base64."""
    task_id = task_id or str(uuid.uuid4())
    options = {"argsrepr": argsrepr, **_route(app, name)}
    queue = options.pop("queue")
    headers, properties, body, _sent = app.amqp.create_task_message(
        task_id,
        name,
        args,
        None,
        reply_to=app.thread_oid,
        time_limit=time_limit,
        ignore_result=_send_task_ignore_result(),
        **options,
    )
    # What Celery's publish adds (the options the producer does not consume), then kombu's.
    properties.update(options)
    properties.update(
        delivery_mode=2,
        delivery_info={"exchange": "", "routing_key": queue.name},
        priority=0,
        # kombu's Redis transport writes a body as base64, as a body may be binary; a JSON
        # body is text, and goes as it is. Every kombu reads it (a message without an
        # encoding is taken as it stands): the worker's consumer thread, which handles each
        # task message in turn, no longer decodes base64, and the message is smaller.
        body_encoding=None,
        delivery_tag=str(uuid.uuid4()),
    )
    message = {
        "body": _json(body).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": headers,
        "properties": properties,
    }
    return queue.name, _json(message)


def _send_task_ignore_result() -> bool | None:
    """The ``ignore_result`` header ``send_task`` writes when not told: False until Celery 5.7,
    None (the task's own setting decides) from 5.7."""
    import celery

    return None if celery.VERSION[:2] >= (5, 7) else False


def _json(value: Any) -> bytes:
    """JSON as kombu writes it, about ten times faster for a history of messages; a value
    orjson does not write (kombu's own types) is left to kombu."""
    try:
        return orjson.dumps(value)
    except TypeError:
        from kombu.utils.json import dumps

        return dumps(value).encode()


class _Clients:
    """One async Redis client per event loop (a client is bound to the loop that opened it)."""

    def __init__(self) -> None:
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, Any]] = {}

    def get(self, app: Celery) -> Any:
        from redis import asyncio as redis_asyncio

        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is not None and entry[0] is loop:
            return entry[1]
        conf = app.conf
        options = conf.broker_transport_options or {}
        # The broker's own timeouts, as kombu applies them: an unreachable Redis fails the
        # push (and Celery's publish, with its retries, takes over) instead of holding the turn.
        client = redis_asyncio.Redis.from_url(
            str(conf.broker_write_url or conf.broker_url),
            socket_connect_timeout=options.get(
                "socket_connect_timeout", conf.broker_connection_timeout
            ),
            socket_timeout=options.get("socket_timeout"),
        )
        self._clients[id(loop)] = (loop, client)
        return client

    async def close_all(self) -> None:
        loop = asyncio.get_running_loop()
        for key, (client_loop, client) in list(self._clients.items()):
            if client_loop is loop:
                del self._clients[key]
                await client.aclose()


CLIENTS = _Clients()


async def publish_task(
    app: Celery, *, name: str, args: list[Any], argsrepr: str, time_limit: float | None
) -> None:
    """Push the task's message onto its queue (``fast_publish_possible`` said it may)."""
    key, message = task_message(app, name=name, args=args, argsrepr=argsrepr, time_limit=time_limit)
    await command_at_once(CLIENTS.get(app), "LPUSH", key, message)


async def task_publish_close() -> None:
    await CLIENTS.close_all()
