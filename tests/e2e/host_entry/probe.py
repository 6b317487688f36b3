"""A host project's own pieces, copied into the ``startproject`` site as ``hostsite/probe.py``
by tests/e2e/test_host_entry.py: a request-logging middleware the runtime's front cannot run,
a websocket consumer of the project's own, and a lifespan of its own."""

import os
from pathlib import Path

from channels.generic.websocket import WebsocketConsumer

LOG = Path(os.environ["HOST_PROBE_LOG"])


def _note(line: str) -> None:
    with LOG.open("a") as log:
        log.write(line + "\n")


class RequestLogMiddleware:
    """The project's own request log: one line per request it sees."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        _note(f"request {request.method} {request.path}")
        return self.get_response(request)


class EchoConsumer(WebsocketConsumer):
    def receive(self, text_data=None, bytes_data=None):
        self.send(text_data=f"echo: {text_data}")


async def host_lifespan(scope, receive, send):
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            _note("host started")
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            _note("host stopped")
            await send({"type": "lifespan.shutdown.complete"})
            return
