"""`FakeUpstream`: the server on a background thread with its own event loop, for tests.

The control helpers talk to the shared `FakeState` directly (no HTTP), so a synchronous test
and an async test on another loop can both script the fake without awaiting anything.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

from benchmarks.fake_upstream.directives import parse_directive
from benchmarks.fake_upstream.server import FakeUpstreamServer
from benchmarks.fake_upstream.state import DEFAULT_MAX_RECORDED_REQUESTS, FakeState

_START_TIMEOUT_S = 10.0


class FakeUpstream:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token_delay_ms: float = 0.0,
        max_recorded_requests: int = DEFAULT_MAX_RECORDED_REQUESTS,
    ) -> None:
        self.state = FakeState(max_recorded_requests=max_recorded_requests)
        self._server = FakeUpstreamServer(
            state=self.state, host=host, port=port, token_delay_ms=token_delay_ms
        )
        self._port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_requested: asyncio.Event | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeUpstream is not started")
        return self._port

    @property
    def root_url(self) -> str:
        return f"http://{self._server.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as `base_url`."""
        return f"{self.root_url}/v1"

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError("FakeUpstream is already started")
        self._thread = threading.Thread(target=self._run, name="fake-upstream", daemon=True)
        self._thread.start()
        if not self._started.wait(_START_TIMEOUT_S):
            raise RuntimeError("FakeUpstream did not start in time")
        if self._start_error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError("FakeUpstream failed to start") from self._start_error
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._loop is not None and self._stop_requested is not None:
            self._loop.call_soon_threadsafe(self._stop_requested.set)
        self._thread.join(_START_TIMEOUT_S)
        self._thread = None
        self._port = None

    def script(self, *directives: Mapping[str, Any]) -> None:
        """Queue directives, consumed one per chat request (first in, first out)."""
        self.state.enqueue([parse_directive(directive) for directive in directives])

    def reset(self) -> None:
        self.state.reset()

    def requests(self) -> list[dict[str, Any]]:
        return self.state.requests()

    def stats(self) -> dict[str, int]:
        return self.state.stats()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.close()
            self._loop = None

    async def _serve(self) -> None:
        self._stop_requested = asyncio.Event()
        try:
            self._port = await self._server.start()
        except BaseException as error:  # reported to the thread that called start()
            self._start_error = error
            self._started.set()
            return
        self._started.set()
        try:
            await self._stop_requested.wait()
        finally:
            await self._server.close()
