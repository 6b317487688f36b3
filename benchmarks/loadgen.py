"""Load generator: N simulated CopilotKit clients streaming ``generateCopilotResponse`` (v1,
GraphQL) or AG-UI runs (v2, ``--protocol agui``).

Each client owns one keep-alive HTTP/1.1 connection (asyncio streams, no HTTP library, so the
generator stays cheap next to the server it shares the cores with) and loops: send the real
client's request bytes (``benchmarks.client_request``) for a fresh thread, read the chunked
``multipart/mixed`` answer incrementally (``benchmarks.response_reader``), record time to first
token, total latency (until ``hasNext: false``) and tokens, and check the response status is
``Success`` and the token count is what the fake upstream was asked for.

Timing: the clients run ``warmup_seconds`` first; then the measured window opens (hook
``on_window_start``) and closes after ``duration_seconds`` or once ``requests`` requests have
completed inside it (hook ``on_window_end``). Figures cover the requests that *completed* inside
the window, so throughput = completions / window length, and the hooks let the caller sample
the server's CPU over exactly that window. Requests still in flight at the end are drained, not
counted.

    python -m benchmarks.loadgen --url http://127.0.0.1:8000/api/copilotkit \\
        --concurrency 50 --tokens 50 --duration 15 --warmup 3 [--json]

The fake upstream answers ``FAKE: {"tokens": N}`` in the user message with N tokens.

With ``--protocol agui`` each client sends the v2 frontend core's run request instead
(``benchmarks.agui_request``: ``POST <url>/agent/default/run``) and reads the SSE answer
(``benchmarks.sse_reader``); the figures mean the same (TTFT at the first
``TEXT_MESSAGE_CONTENT``, the end at ``RUN_FINISHED``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from benchmarks import agui_request
from benchmarks.client_request import http_request, new_thread_id, request_body
from benchmarks.response_reader import (
    MultipartMixedParser,
    ResponseProtocolError,
    StreamObservation,
    StreamReader,
    boundary_from_content_type,
)
from benchmarks.sse_reader import AguiObservation, AguiStreamReader, is_event_stream
from benchmarks.stats import Distribution, LoadSummary

__all__ = [
    "LoadPlan",
    "MultipartMixedParser",
    "RequestResult",
    "StreamObservation",
    "StreamReader",
    "Target",
    "run_load",
    "send_one",
]

MAX_ERROR_SAMPLES = 5
CONNECT_RETRY_PAUSE_SECONDS = 0.05
WindowHook = Callable[[], None]
GRAPHQL = "graphql"
AGUI = "agui"
PROTOCOLS = (GRAPHQL, AGUI)


@dataclass(frozen=True)
class Target:
    """Where the runtime endpoint is."""

    host: str
    port: int
    path: str = "/api/copilotkit"
    extra_headers: dict[str, str] = field(default_factory=dict)
    # ``graphql`` (v1: generateCopilotResponse) or ``agui`` (v2: POST <path>/agent/default/run).
    protocol: str = GRAPHQL

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, not {self.protocol!r}")

    @classmethod
    def from_url(
        cls, url: str, *, extra_headers: dict[str, str] | None = None, protocol: str = GRAPHQL
    ) -> Target:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"only http://host:port/path URLs are supported, not {url!r}")
        return cls(
            host=parts.hostname,
            port=parts.port or 80,
            path=parts.path or "/",
            extra_headers=dict(extra_headers or {}),
            protocol=protocol,
        )

    def with_protocol(self, protocol: str) -> Target:
        return Target(
            host=self.host,
            port=self.port,
            path=self.path,
            extra_headers=dict(self.extra_headers),
            protocol=protocol,
        )

    @property
    def host_header(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class LoadPlan:
    concurrency: int
    tokens: int
    warmup_seconds: float = 3.0
    duration_seconds: float | None = 15.0
    requests: int | None = None
    request_timeout_seconds: float = 60.0
    drain_timeout_seconds: float = 30.0

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if (self.duration_seconds is None) == (self.requests is None):
            raise ValueError("give exactly one of duration_seconds and requests")


@dataclass(frozen=True)
class RequestResult:
    """One request; times are ``time.perf_counter()`` seconds, ``ttft``/``latency`` durations."""

    started_at: float
    finished_at: float
    ttft: float | None
    latency: float
    tokens: int
    ok: bool
    error: str | None = None
    # Content items (multipart chunks of text) the tokens came in.
    content_items: int = 0


# --- one HTTP/1.1 exchange --------------------------------------------------------------------


class HttpError(Exception):
    """The server answered something other than a multipart stream, or broke the framing."""


async def _chunked_body(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0], 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailer fields
            return
        chunk = await reader.readexactly(size + 2)
        yield chunk[:-2]


async def _length_body(reader: asyncio.StreamReader, length: int) -> AsyncIterator[bytes]:
    remaining = length
    while remaining > 0:
        chunk = await reader.read(min(remaining, 65536))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", remaining)
        remaining -= len(chunk)
        yield chunk


async def _until_eof(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while chunk := await reader.read(65536):
        yield chunk


class Connection:
    """A keep-alive connection; ``reusable`` turns False when the server or an error ends it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reusable = True

    @classmethod
    async def open(cls, target: Target) -> Connection:
        reader, writer = await asyncio.open_connection(target.host, target.port)
        return cls(reader, writer)

    async def close(self) -> None:
        self.reusable = False
        self.writer.close()
        with contextlib.suppress(OSError, asyncio.CancelledError):
            await self.writer.wait_closed()

    async def exchange(self, request: bytes) -> tuple[float, StreamObservation | AguiObservation]:
        """Send ``request``; read the whole response. Returns (send time, observation)."""
        reader = self.reader
        started_at = time.perf_counter()
        self.writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
        version, status, *_ = status_line.split(" ", 2)
        headers: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if version != "HTTP/1.1" or headers.get("connection", "").lower() == "close":
            self.reusable = False

        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = _chunked_body(reader)
        elif "content-length" in headers:
            body = _length_body(reader, int(headers["content-length"]))
        else:
            self.reusable = False
            body = _until_eof(reader)

        content_type = headers.get("content-type", "")
        boundary = boundary_from_content_type(content_type)
        event_stream = is_event_stream(content_type)
        if status != "200" or (boundary is None and not event_stream):
            whole = b"".join([chunk async for chunk in body])
            raise HttpError(
                f"HTTP {status} {headers.get('content-type', '-')}: "
                f"{whole[:300].decode(errors='replace')}"
            )
        stream: StreamReader | AguiStreamReader = (
            AguiStreamReader() if event_stream else StreamReader(boundary or b"-")
        )
        perf_counter = time.perf_counter
        async for chunk in body:
            stream.feed(chunk, perf_counter())
        return started_at, stream.observation


def _judge(
    observation: StreamObservation | AguiObservation,
    *,
    started_at: float,
    expected_tokens: int | None,
) -> RequestResult:
    finished_at = observation.finished_at or time.perf_counter()
    error = None
    if not observation.finished:
        error = (
            "stream ended without RUN_FINISHED or RUN_ERROR"
            if isinstance(observation, AguiObservation)
            else "stream ended without hasNext:false"
        )
    elif observation.errors:
        error = f"GraphQL errors: {json.dumps(observation.errors)[:300]}"
    elif observation.response_status != "Success":
        error = f"status {observation.response_status}: {observation.failure}"
    elif expected_tokens is not None and observation.tokens != expected_tokens:
        error = f"{observation.tokens} tokens received, {expected_tokens} expected"
    return RequestResult(
        started_at=started_at,
        finished_at=finished_at,
        ttft=None
        if observation.first_token_at is None
        else observation.first_token_at - started_at,
        latency=finished_at - started_at,
        tokens=observation.tokens,
        content_items=observation.content_items,
        ok=error is None,
        error=error,
    )


async def send_one(
    connection: Connection,
    *,
    target: Target,
    tokens: int,
    timeout_seconds: float = 60.0,
) -> RequestResult:
    """One ``generateCopilotResponse`` (or, for ``agui``, one run) for a fresh thread on
    ``connection``; never raises."""
    if target.protocol == AGUI:
        request = agui_request.http_request(
            host=target.host_header,
            path=agui_request.run_path(target.path),
            body=agui_request.request_body(thread_id=new_thread_id(), tokens=tokens),
            extra_headers=target.extra_headers,
        )
    else:
        request = http_request(
            host=target.host_header,
            path=target.path,
            body=request_body(thread_id=new_thread_id(), tokens=tokens),
            extra_headers=target.extra_headers,
        )
    started_at = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_seconds):
            started_at, observation = await connection.exchange(request)
    except (
        OSError,
        TimeoutError,
        asyncio.IncompleteReadError,
        asyncio.LimitOverrunError,
        HttpError,
        ResponseProtocolError,
        ValueError,
    ) as exc:
        connection.reusable = False
        now = time.perf_counter()
        return RequestResult(
            started_at=started_at,
            finished_at=now,
            ttft=None,
            latency=now - started_at,
            tokens=0,
            ok=False,
            error=f"{type(exc).__name__}: {exc}"[:400],
        )
    return _judge(observation, started_at=started_at, expected_tokens=tokens)


# --- the load loop ----------------------------------------------------------------------------


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


class _LoadRun:
    def __init__(
        self,
        *,
        target: Target,
        plan: LoadPlan,
        on_window_start: WindowHook | None,
        on_window_end: WindowHook | None,
    ) -> None:
        self.target = target
        self.plan = plan
        self.on_window_start = on_window_start
        self.on_window_end = on_window_end
        self.stop = asyncio.Event()
        self.window_closed = asyncio.Event()
        self.window_start: float | None = None
        self.window_end: float | None = None
        self.cpu_start = 0.0
        self.cpu_end = 0.0
        self.results: list[RequestResult] = []

    def open_window(self) -> None:
        if self.on_window_start is not None:
            self.on_window_start()
        self.cpu_start = _own_cpu_seconds()
        self.window_start = time.perf_counter()

    def close_window(self) -> None:
        if self.window_end is not None or self.window_start is None:
            return
        self.window_end = time.perf_counter()
        self.cpu_end = _own_cpu_seconds()
        if self.on_window_end is not None:
            self.on_window_end()
        self.window_closed.set()
        self.stop.set()

    def record(self, result: RequestResult) -> None:
        if self.window_start is None or self.window_end is not None:
            return
        if result.finished_at < self.window_start:
            return
        self.results.append(result)
        if self.plan.requests is not None and len(self.results) >= self.plan.requests:
            self.close_window()

    async def client(self) -> None:
        connection: Connection | None = None
        try:
            while not self.stop.is_set():
                if connection is None or not connection.reusable:
                    if connection is not None:
                        await connection.close()
                    try:
                        connection = await Connection.open(self.target)
                    except OSError as exc:
                        connection = None
                        now = time.perf_counter()
                        self.record(
                            RequestResult(
                                started_at=now,
                                finished_at=now,
                                ttft=None,
                                latency=0.0,
                                tokens=0,
                                ok=False,
                                error=f"connect: {exc}",
                            )
                        )
                        await asyncio.sleep(CONNECT_RETRY_PAUSE_SECONDS)
                        continue
                result = await send_one(
                    connection,
                    target=self.target,
                    tokens=self.plan.tokens,
                    timeout_seconds=self.plan.request_timeout_seconds,
                )
                self.record(result)
        finally:
            if connection is not None:
                await connection.close()

    def summary(self) -> LoadSummary:
        window = (self.window_end or time.perf_counter()) - (self.window_start or 0.0)
        succeeded = [result for result in self.results if result.ok]
        failed = [result for result in self.results if not result.ok]
        completed = len(self.results)
        loadgen_cpu = self.cpu_end - self.cpu_start
        samples: list[str] = []
        for result in failed:
            if result.error and result.error not in samples:
                samples.append(result.error)
            if len(samples) >= MAX_ERROR_SAMPLES:
                break
        return LoadSummary(
            concurrency=self.plan.concurrency,
            tokens_requested=self.plan.tokens,
            window_seconds=round(window, 3),
            completed=completed,
            succeeded=len(succeeded),
            failed=len(failed),
            requests_per_second=round(len(succeeded) / window, 2) if window > 0 else 0.0,
            ttft=Distribution.of_seconds([r.ttft for r in succeeded if r.ttft is not None]),
            latency=Distribution.of_seconds([r.latency for r in succeeded]),
            tokens_per_request_mean=round(sum(r.tokens for r in succeeded) / len(succeeded), 2)
            if succeeded
            else None,
            content_items_per_request_mean=round(
                sum(r.content_items for r in succeeded) / len(succeeded), 2
            )
            if succeeded
            else None,
            loadgen_cpu_ms_per_request=round(loadgen_cpu * 1000 / completed, 3)
            if completed
            else None,
            loadgen_cpu_percent_of_core=round(100 * loadgen_cpu / window, 1) if window > 0 else 0.0,
            error_samples=samples,
        )


async def run_load(
    *,
    target: Target,
    plan: LoadPlan,
    on_window_start: WindowHook | None = None,
    on_window_end: WindowHook | None = None,
) -> LoadSummary:
    """Run ``plan`` against ``target``; the hooks run (synchronously) at the window edges."""
    run = _LoadRun(
        target=target, plan=plan, on_window_start=on_window_start, on_window_end=on_window_end
    )
    clients = [
        asyncio.create_task(run.client(), name=f"loadgen-client-{index}")
        for index in range(plan.concurrency)
    ]
    try:
        await asyncio.sleep(plan.warmup_seconds)
        run.open_window()
        if plan.duration_seconds is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.window_closed.wait(), plan.duration_seconds)
        else:
            await run.window_closed.wait()
        run.close_window()
        # In-flight requests finish (uncounted) so the server is idle before the next phase.
        await asyncio.wait(clients, timeout=plan.drain_timeout_seconds)
    finally:
        run.stop.set()
        for task in clients:
            task.cancel()
        await asyncio.gather(*clients, return_exceptions=True)
    return run.summary()


# --- command line -----------------------------------------------------------------------------


def _parse_header(raw: str) -> tuple[str, str]:
    name, separator, value = raw.partition(":")
    if not separator or not name.strip():
        raise argparse.ArgumentTypeError(f"expected 'Name: value', got {raw!r}")
    return name.strip().lower(), value.strip()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.loadgen",
        description="Stream generateCopilotResponse from N concurrent simulated clients.",
    )
    parser.add_argument("--url", default="http://127.0.0.1:8000/api/copilotkit")
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default=GRAPHQL,
        help="graphql (v1 generateCopilotResponse) or agui (v2 run)",
    )
    parser.add_argument("--concurrency", "-c", type=int, default=1)
    parser.add_argument("--tokens", "-t", type=int, default=50, help="reply length (fake)")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--duration", "-d", type=float, help="measured seconds (default 15)")
    length.add_argument("--requests", "-n", type=int, help="measured requests instead")
    parser.add_argument("--warmup", "-w", type=float, default=3.0, help="seconds, not counted")
    parser.add_argument("--timeout", type=float, default=60.0, help="per request, seconds")
    parser.add_argument(
        "--header", "-H", action="append", type=_parse_header, default=[], help="extra header"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    duration = arguments.duration
    if duration is None and arguments.requests is None:
        duration = 15.0
    plan = LoadPlan(
        concurrency=arguments.concurrency,
        tokens=arguments.tokens,
        warmup_seconds=arguments.warmup,
        duration_seconds=duration,
        requests=arguments.requests,
        request_timeout_seconds=arguments.timeout,
    )
    target = Target.from_url(
        arguments.url, extra_headers=dict(arguments.header), protocol=arguments.protocol
    )
    summary = asyncio.run(run_load(target=target, plan=plan))
    if arguments.json:
        print(json.dumps(summary.as_dict(), indent=2))
    else:
        print(
            f"{summary.concurrency} x {summary.tokens_requested} tokens: "
            f"{summary.requests_per_second} req/s ({summary.succeeded} ok, {summary.failed} "
            f"failed in {summary.window_seconds} s); TTFT p50 {summary.ttft.p50_ms} ms "
            f"p95 {summary.ttft.p95_ms} ms; latency p50 {summary.latency.p50_ms} ms "
            f"p95 {summary.latency.p95_ms} ms; loadgen CPU {summary.loadgen_cpu_percent_of_core}%"
        )
        for sample in summary.error_samples:
            print(f"  error: {sample}")
    return 0 if summary.failed == 0 and summary.succeeded > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
