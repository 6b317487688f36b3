"""Agent peers served on loopback for tests: any ASGI app under uvicorn, in a thread.

    with UvicornServer(app) as server:      # or server.start() / server.stop()
        server.url                           # "http://127.0.0.1:<port>"

The server runs its own event loop in a daemon thread, so both synchronous tests and the
runtime under test (in-process or a daphne subprocess) can call it.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any, Self

import uvicorn

_START_TIMEOUT_S = 20.0


class UvicornServer:
    def __init__(self, app: Any, *, host: str = "127.0.0.1") -> None:
        self._config = uvicorn.Config(
            app, host=host, port=0, log_level="warning", lifespan="off", access_log=False
        )
        self._server = uvicorn.Server(self._config)
        self._thread: threading.Thread | None = None
        self.host = host
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._server.run, name="uvicorn-peer", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the uvicorn peer did not start")
            time.sleep(0.02)
        sockets = self._server.servers[0].sockets
        self.port = int(sockets[0].getsockname()[1])
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(_START_TIMEOUT_S)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
