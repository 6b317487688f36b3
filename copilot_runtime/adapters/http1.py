"""A small HTTP/1.1 client for the model services' streamed answers: pooled keep-alive
connections, answers parsed by httptools (llhttp, which uvicorn serves with too).

Why not aiohttp, which this replaced: under many paced streams, aiohttp's per-chunk handling
(its stream reader, its payload parser, its timers) and the request and response objects it
builds per request were the largest costs of the runtime's own in the relay, and importing it
added megabytes to every web process. The runtime needs one thing
from a client: POST a body, get the status and headers, then the body's bytes as they come.
That is what this module does, and nothing else (no redirects, cookies, proxies, compression
or multipart; the services answer plain JSON or server-sent events).

Errors: ``ConnectFailed`` when no answer's headers came (the service could not be reached, or
closed the connection first); ``AnswerCut`` when the answer stopped before its end. Timeouts are
the caller's (``asyncio.timeout`` around ``send``; ``Answer.set_exception`` fails a waiting read).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

import httptools

# A consumer slower than its service: past this many unread bytes the socket stops being read
# until the consumer catches up (the service then waits on TCP's own flow control).
_HIGH_WATER = 1 << 20
# Idle connections older than this are closed rather than reused: servers drop idle keep-alive
# connections after a while (commonly 5-60 s), and a request written to one is lost.
IDLE_SECONDS = 15.0


class ConnectFailed(Exception):
    """No answer came: the connection failed, or it closed before the answer's headers."""


class _StaleConnection(ConnectFailed):
    """A reused connection closed before a byte of the answer: the service had closed it while
    it was idle, so the request was never read and is sent again on a new connection."""


class AnswerCut(Exception):
    """The answer stopped before its end: the connection closed, or its bytes were not HTTP."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a request goes, and the request's bytes up to its body's length."""

    host: str
    port: int
    tls: bool
    head: bytes  # request line and headers, ending with "Content-Length: "

    @property
    def origin(self) -> tuple[str, int, bool]:
        return (self.host, self.port, self.tls)

    def request(self, body: bytes) -> bytes:
        return b"%s%d\r\n\r\n%s" % (self.head, len(body), body)


def endpoint_for(url: str, *, headers: Mapping[str, str]) -> Endpoint:
    """``url``'s endpoint for POST requests carrying ``headers`` (plus Host and the length)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"Not an http(s) URL: {url!r}")
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    host = parts.hostname
    authority = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        authority += f":{port}"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"POST {target} HTTP/1.1", f"Host: {authority}"]
    for name, value in headers.items():
        if any(c in name + value for c in "\r\n\0") or not name or ":" in name:
            # A header value carrying a line break would let it write headers of its own.
            raise ValueError(f"Header {name!r} is not a valid HTTP header.")
        lines.append(f"{name}: {value}")
    lines.append("Content-Length: ")
    return Endpoint(host=host, port=port, tls=tls, head="\r\n".join(lines).encode("latin-1"))


class Answer:
    """A service's answer: its status and headers, then its body read as it comes."""

    __slots__ = (
        "_buffered",
        "_chunks",
        "_connection",
        "_done",
        "_error",
        "_keep_alive",
        "_paused",
        "_released",
        "_waiter",
        "headers",
        "status",
        "waiting_since",
    )  # fmt: skip

    def __init__(self, connection: _Connection, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers  # names in lower case
        self._connection = connection
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._done = False
        self._keep_alive = False
        self._released = False
        # When the read waiting now began waiting for the service (loop time), else None.
        self.waiting_since: float | None = None

    async def read(self) -> bytes:
        """The body's bytes received since the last read (waiting for some); b"" at its end."""
        if not self._chunks:
            if self._error is not None:
                raise self._error
            if self._done:
                return b""
            loop = self._connection.loop
            waiter = self._waiter = loop.create_future()
            self.waiting_since = loop.time()
            try:
                await waiter
            finally:
                self._waiter = None
                self.waiting_since = None
            if not self._chunks:
                if self._error is not None:
                    raise self._error
                return b""
        chunks = self._chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self._buffered = 0
        if self._paused:
            self._paused = False
            self._connection.resume_reading()
        return data

    async def read_all(self) -> bytes:
        parts = []
        while data := await self.read():
            parts.append(data)
        return b"".join(parts)

    def set_exception(self, error: BaseException) -> None:
        """Fail the read waiting now, or the next one once what was received is read."""
        if self._error is None and not self._done:
            self._error = error
            self._wake()

    def release(self) -> None:
        """Done with the answer: its connection is reused if the whole body was read and the
        service keeps it open, and closed otherwise (so a service stops generating). Only the
        first call counts: a connection is never handed back twice."""
        if self._released:
            return
        self._released = True
        connection, self._connection.answer = self._connection, None
        if self._done and self._keep_alive and not self._chunks:
            connection.reusable()
        else:
            connection.close()

    # Fed by the connection.
    def _feed(self, parts: list[bytes]) -> None:
        """The body's parts one read of the socket delivered (its HTTP chunks)."""
        self._chunks += parts
        self._buffered += sum(map(len, parts))  # in C: one Python step per read, not per chunk
        if self._buffered > _HIGH_WATER and not self._paused:
            self._paused = True
            self._connection.pause_reading()
        self._wake()

    def _finish(self, *, keep_alive: bool) -> None:
        self._done = True
        self._keep_alive = keep_alive
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _Connection(asyncio.Protocol):
    """One connection to a service, carrying one exchange at a time."""

    def __init__(self, pool: ConnectionPool, origin: tuple[str, int, bool]) -> None:
        self.loop = asyncio.get_running_loop()
        self.pool = pool
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.answer: Answer | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._headers: dict[str, str] = {}
        self._headers_due: asyncio.Future[Answer] | None = None
        self._received = False
        self._until_close = False
        # httptools hands each HTTP chunk of a body to ``on_body``, most often one per token:
        # collected by the list's own append (no Python call per chunk), and given to the answer
        # once per read of the socket (``_deliver``).
        self._body: list[bytes] = []
        self.on_body = self._body.append

    # The exchange.
    async def exchange(self, request: bytes) -> Answer:
        assert self.transport is not None and self.answer is None
        self._parser = httptools.HttpResponseParser(self)
        self._headers = {}
        self._received = False
        due = self._headers_due = self.loop.create_future()
        self.transport.write(request)
        try:
            return await due
        finally:
            self._headers_due = None

    def reusable(self) -> None:
        self._parser = None
        if self.closed:
            return
        self.idle_since = self.loop.time()
        self.pool.idle(self)

    def close(self) -> None:
        if self.answer is not None:
            self._fail(None)  # a reader still waiting on the answer learns it was cut
            self.answer = None
        self._parser = None
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            self.pool.forget(self)

    def pause_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    # asyncio's calls.
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport's subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None:
            # Bytes on an idle connection answer nothing that was asked: it cannot be reused.
            self.close()
            return
        self._received = True
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._deliver()  # what came before the error is read first
            self._fail(exc)
            self.close()
            return
        if self._body:
            self._deliver()

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        was_closed = self.closed
        self.closed = True
        answer = self.answer
        if answer is not None and not answer._done and self._until_close and exc is None:
            # An answer delimited by the connection's end (no length, not chunked).
            answer._finish(keep_alive=False)
        else:
            self._fail(exc)
        if not was_closed:
            self.pool.forget(self)

    def _fail(self, exc: BaseException | None) -> None:
        due = self._headers_due
        if due is not None and not due.done():
            failed = ConnectFailed if self._received else _StaleConnection
            error = failed(
                "The connection closed before the service answered."
                if exc is None or isinstance(exc, OSError)
                else f"The service's answer is not HTTP: {exc}"
            )
            error.__cause__ = exc
            due.set_exception(error)
        answer = self.answer
        if answer is not None and not answer._done:
            cut = AnswerCut("The connection closed before the answer's end.")
            cut.__cause__ = exc
            answer.set_exception(cut)

    # httptools' calls.
    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        previous = self._headers.get(key)
        self._headers[key] = text if previous is None else f"{previous}, {text}"

    def on_headers_complete(self) -> None:
        parser = self._parser
        assert parser is not None
        headers = self._headers
        if parser.get_status_code() < 200:
            # An interim answer (100 Continue, 103 Early Hints): the real one follows.
            self._headers = {}
            return
        self._until_close = (
            "content-length" not in headers
            and "chunked" not in headers.get("transfer-encoding", "").lower()
        )
        answer = self.answer = Answer(self, parser.get_status_code(), headers)
        due = self._headers_due
        if due is not None and not due.done():
            due.set_result(answer)

    def on_message_complete(self) -> None:
        self._deliver()
        parser = self._parser
        if self.answer is not None and parser is not None:
            self.answer._finish(keep_alive=parser.should_keep_alive())

    def _deliver(self) -> None:
        """Hand the body's parts collected so far to the answer."""
        body = self._body
        if body and self.answer is not None:
            self.answer._feed(body)
        body.clear()


class ConnectionPool:
    """Keep-alive connections per origin, for one event loop. No limit on their number: the
    runtime bounds its concurrent turns itself."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None) -> None:
        self._ssl_context = ssl_context
        self._idle: dict[tuple[str, int, bool], list[_Connection]] = {}
        self._open: set[_Connection] = set()

    async def send(self, endpoint: Endpoint, body: bytes) -> Answer:
        """Send a POST with ``body``; its answer once the headers came."""
        request = endpoint.request(body)
        while True:
            connection = self._reuse(endpoint.origin)
            reused = connection is not None
            if connection is None:
                connection = await self._connect(endpoint)
            try:
                return await connection.exchange(request)
            except _StaleConnection:
                connection.close()
                if reused:
                    continue
                raise
            except BaseException:
                connection.close()
                raise

    def _reuse(self, origin: tuple[str, int, bool]) -> _Connection | None:
        idle = self._idle.get(origin)
        if not idle:
            return None
        now = asyncio.get_running_loop().time()
        while idle:
            connection = idle.pop()
            if not connection.closed and now - connection.idle_since < IDLE_SECONDS:
                return connection
            connection.close()
        return None

    async def _connect(self, endpoint: Endpoint) -> _Connection:
        loop = asyncio.get_running_loop()
        connection = _Connection(self, endpoint.origin)
        context = None
        if endpoint.tls:
            context = self._ssl_context = self._ssl_context or ssl.create_default_context()
        try:
            await loop.create_connection(
                lambda: connection,
                endpoint.host,
                endpoint.port,
                ssl=context,
                server_hostname=endpoint.host if context is not None else None,
            )
        except (OSError, ValueError) as exc:
            # Refused, unresolvable, TLS refused (ssl.SSLError), a host name IDNA cannot encode.
            raise ConnectFailed(f"Could not connect to {endpoint.host}:{endpoint.port}.") from exc
        self._open.add(connection)
        return connection

    @property
    def open_connections(self) -> int:
        return len(self._open)

    # Called by connections.
    def idle(self, connection: _Connection) -> None:
        self._idle.setdefault(connection.origin, []).append(connection)

    def forget(self, connection: _Connection) -> None:
        self._open.discard(connection)
        idle = self._idle.get(connection.origin)
        if idle and connection in idle:
            idle.remove(connection)

    async def aclose(self) -> None:
        for connection in list(self._open):
            connection.close()
        self._idle.clear()
        # Let the transports' close callbacks run before the loop may stop.
        await asyncio.sleep(0)
