"""The model services' HTTP/1.1 client, against raw asyncio servers that answer byte by byte
as a test needs: kept-alive and closed connections, streamed, cut and malformed answers, TLS."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
import trustme

from copilot_runtime.adapters.http1 import (
    AnswerCut,
    ConnectFailed,
    ConnectionPool,
    Endpoint,
    endpoint_for,
)

GIVE_UP = 10.0


@dataclass
class Server:
    port: int
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)

    def endpoint(self, *, scheme: str = "http", host: str = "127.0.0.1") -> Endpoint:
        return endpoint_for(f"{scheme}://{host}:{self.port}/v1/chat", headers={"X-Key": "k"})


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head + await reader.readexactly(length)


@asynccontextmanager
async def serving(
    answer: Callable[[Server, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    *,
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[Server]:
    """A server calling ``answer`` once per accepted connection."""
    server = Server(port=0)

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.connections += 1
        try:
            await answer(server, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    listening = await asyncio.start_server(accept, "127.0.0.1", 0, ssl=tls)
    server.port = listening.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listening.close()


async def keep_alive_answers(
    server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Answers every request on the connection with its number, by Content-Length."""
    while True:
        try:
            request = await read_request(reader)
        except asyncio.IncompleteReadError:
            return
        server.requests.append(request)
        body = b"answer %d" % len(server.requests)
        writer.write(
            b"HTTP/1.1 200 OK\r\nX-Thing: a\r\nx-thing: b\r\nContent-Length: %d\r\n\r\n" % len(body)
            + body
        )
        await writer.drain()


Answering = Callable[[Server, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def answering(raw: bytes, *, then: str = "close", closed: asyncio.Event | None = None) -> Answering:
    """A service that reads one request, writes ``raw``, then closes the connection
    ("close"), reads until the client closes it ("read"; ``closed`` is set then), or holds it
    open ("hold")."""

    async def answer(
        server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await read_request(reader)
        writer.write(raw)
        await writer.drain()
        if then == "read":
            await reader.read()
            if closed is not None:
                closed.set()
        elif then == "hold":
            await asyncio.sleep(GIVE_UP)

    return answer


async def test_an_answer_is_read_and_its_connection_reused() -> None:
    pool = ConnectionPool()
    async with serving(keep_alive_answers) as server:
        bodies = []
        for n in range(3):
            answer = await pool.send(server.endpoint(), b'{"n": %d}' % n)
            assert answer.status == 200
            assert answer.headers["x-thing"] == "a, b"
            bodies.append(await answer.read_all())
            answer.release()
        await pool.aclose()
    assert bodies == [b"answer 1", b"answer 2", b"answer 3"]
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /v1/chat HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n" % server.port)
    assert b"\r\nX-Key: k\r\n" in first
    assert first.endswith(b'Content-Length: 8\r\n\r\n{"n": 0}')


async def test_an_answer_released_twice_hands_its_connection_back_once() -> None:
    pool = ConnectionPool()
    async with serving(keep_alive_answers) as server:
        answer = await pool.send(server.endpoint(), b"{}")
        assert await answer.read_all() == b"answer 1"
        answer.release()
        answer.release()
        # Two requests at once: each on a connection of its own.
        first, second = await asyncio.wait_for(
            asyncio.gather(*(pool.send(server.endpoint(), b"{}") for _ in range(2))), GIVE_UP
        )
        bodies = sorted([await first.read_all(), await second.read_all()])
        first.release()
        second.release()
        await pool.aclose()
    assert bodies == [b"answer 2", b"answer 3"]
    assert server.connections == 2


async def test_a_chunked_answer_is_read_as_it_comes() -> None:
    second_chunk_may_go = asyncio.Event()

    async def streamed(
        server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await second_chunk_may_go.wait()
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
        await reader.read()

    pool = ConnectionPool()
    async with serving(streamed) as server:
        answer = await pool.send(server.endpoint(), b"{}")
        # The first chunk is read while the service still holds the second back.
        assert await asyncio.wait_for(answer.read(), GIVE_UP) == b"first"
        second_chunk_may_go.set()
        assert await asyncio.wait_for(answer.read_all(), GIVE_UP) == b"second"
        answer.release()
        await pool.aclose()


async def test_the_chunks_one_read_delivered_are_read_together_and_in_order() -> None:
    async def many_chunks(
        server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await read_request(reader)
        chunks = b"".join(
            b"%x\r\n%s\r\n" % (len(b"part%d;" % n), b"part%d;" % n) for n in range(40)
        )
        writer.write(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
        )
        await reader.read()

    pool = ConnectionPool()
    async with serving(many_chunks) as server:
        answer = await asyncio.wait_for(pool.send(server.endpoint(), b"{}"), GIVE_UP)
        reads = []
        while data := await asyncio.wait_for(answer.read(), GIVE_UP):
            reads.append(data)
        answer.release()
        await pool.aclose()
    assert b"".join(reads) == b"".join(b"part%d;" % n for n in range(40))
    assert len(reads) < 40  # whole reads of the socket, not one per chunk


async def test_the_chunks_before_a_malformed_one_are_read_then_the_answer_is_cut() -> None:
    pool = ConnectionPool()
    async with serving(
        answering(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nfirst\r\n6\r\nsecond\r\nzz\r\nnot a chunk\r\n",
            then="hold",
        )
    ) as server:
        answer = await asyncio.wait_for(pool.send(server.endpoint(), b"{}"), GIVE_UP)
        assert await asyncio.wait_for(answer.read(), GIVE_UP) == b"firstsecond"
        with pytest.raises(AnswerCut):
            await asyncio.wait_for(answer.read(), GIVE_UP)
        answer.release()
        await pool.aclose()


@pytest.mark.parametrize(
    "service",
    [
        # Neither a length nor chunks: the answer's end is the connection's.
        answering(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\n"),
        # A whole answer announced as the connection's last (the close itself is not awaited).
        answering(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 9\r\n\r\ndata: 1\n\n",
            then="hold",
        ),
    ],
    ids=["ended by the close", "Connection: close"],
)
async def test_an_answer_on_a_connection_the_service_ends_is_whole_and_not_reused(
    service: Answering,
) -> None:
    pool = ConnectionPool()
    async with serving(service) as server:
        for _ in range(2):
            answer = await asyncio.wait_for(pool.send(server.endpoint(), b"{}"), GIVE_UP)
            assert await asyncio.wait_for(answer.read_all(), GIVE_UP) == b"data: 1\n\n"
            answer.release()
        await pool.aclose()
    assert server.connections == 2


async def test_an_answer_cut_before_its_length_fails_the_read() -> None:
    pool = ConnectionPool()
    async with serving(
        answering(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
    ) as server:
        answer = await pool.send(server.endpoint(), b"{}")
        assert await answer.read() == b"partial"
        with pytest.raises(AnswerCut):
            await asyncio.wait_for(answer.read(), GIVE_UP)
        answer.release()
        await pool.aclose()


async def test_a_kept_alive_connection_the_service_dropped_is_replaced() -> None:
    # The service answers the first request, then closes the connection on reading the second
    # without answering it (as when an idle keep-alive connection times out at the service
    # while the request is on its way): the request goes again on a new connection.
    async def once_per_connection(
        server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        server.requests.append(await read_request(reader))
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%d"
            % (len(str(len(server.requests))), len(server.requests))
        )
        await writer.drain()
        await read_request(reader)

    pool = ConnectionPool()
    async with serving(once_per_connection) as server:
        answers = []
        for _ in range(2):
            answer = await asyncio.wait_for(pool.send(server.endpoint(), b"{}"), GIVE_UP)
            answers.append(await answer.read_all())
            answer.release()
        await pool.aclose()
    assert answers == [b"1", b"2"]
    assert server.connections == 2


async def test_a_new_connection_closed_without_an_answer_fails() -> None:
    pool = ConnectionPool()
    async with serving(answering(b"")) as server:
        with pytest.raises(ConnectFailed):
            await asyncio.wait_for(pool.send(server.endpoint(), b"{}"), GIVE_UP)
        await pool.aclose()
    assert server.connections == 1  # not retried: a new connection is not a stale one


async def test_bytes_that_are_not_http_fail_the_request() -> None:
    pool = ConnectionPool()
    async with serving(answering(b"SSH-2.0-OpenSSH\r\n\r\n", then="read")) as server:
        with pytest.raises(ConnectFailed):
            await asyncio.wait_for(pool.send(server.endpoint(), b"{}"), GIVE_UP)
        await pool.aclose()


async def test_an_unreachable_service_fails_to_connect() -> None:
    async with serving(keep_alive_answers) as server:
        port = server.port
    pool = ConnectionPool()
    with pytest.raises(ConnectFailed):
        await asyncio.wait_for(
            pool.send(endpoint_for(f"http://127.0.0.1:{port}/", headers={}), b"{}"), GIVE_UP
        )


async def test_an_abandoned_answer_closes_its_connection() -> None:
    service_saw_the_close = asyncio.Event()
    endless = answering(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nmore\r\n",
        then="read",
        closed=service_saw_the_close,
    )

    pool = ConnectionPool()
    async with serving(endless) as server:
        answer = await pool.send(server.endpoint(), b"{}")
        assert await answer.read() == b"more"
        answer.release()  # stopped reading before the end
        await asyncio.wait_for(service_saw_the_close.wait(), GIVE_UP)
        await pool.aclose()


async def test_closing_the_pool_fails_a_waiting_read() -> None:
    pool = ConnectionPool()
    async with serving(
        answering(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", then="read")
    ) as server:
        answer = await pool.send(server.endpoint(), b"{}")
        reading = asyncio.ensure_future(answer.read())
        await asyncio.sleep(0.05)
        await pool.aclose()
        with pytest.raises(AnswerCut):
            await asyncio.wait_for(reading, GIVE_UP)


async def test_an_interim_answer_is_skipped() -> None:
    pool = ConnectionPool()
    async with serving(
        answering(
            b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
            b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
            then="read",
        )
    ) as server:
        answer = await asyncio.wait_for(pool.send(server.endpoint(), b"{}"), GIVE_UP)
        assert (answer.status, "link" in answer.headers, await answer.read_all()) == (
            201,
            False,
            b"ok",
        )
        answer.release()
        await pool.aclose()


async def test_a_consumer_that_does_not_read_holds_the_service_back() -> None:
    # 64 MiB unread: more than the client buffers and the sockets hold, so the service's writes
    # wait until the consumer reads. Then every byte arrives, in order.
    size = 64 << 20
    service_waited = asyncio.Event()
    body = bytes(range(256)) * (size // 256)

    async def big(
        server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + body)
        try:
            await asyncio.wait_for(writer.drain(), 0.5)
        except TimeoutError:
            service_waited.set()
            await writer.drain()
        await reader.read()

    pool = ConnectionPool()
    async with serving(big) as server:
        answer = await pool.send(server.endpoint(), b"{}")
        await asyncio.wait_for(service_waited.wait(), GIVE_UP)
        assert await asyncio.wait_for(answer.read_all(), GIVE_UP) == body
        answer.release()
        await pool.aclose()


async def test_https_is_verified_against_the_trusted_authorities() -> None:
    authority = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_context)
    trusting = ssl.create_default_context()
    authority.configure_trust(trusting)

    async with serving(keep_alive_answers, tls=server_context) as server:
        pool = ConnectionPool(ssl_context=trusting)
        answer = await asyncio.wait_for(pool.send(server.endpoint(scheme="https"), b"{}"), GIVE_UP)
        assert await answer.read_all() == b"answer 1"
        answer.release()
        await pool.aclose()

        # The system's authorities do not know this one: no answer is read from it.
        untrusting = ConnectionPool()
        with pytest.raises(ConnectFailed):
            await asyncio.wait_for(untrusting.send(server.endpoint(scheme="https"), b"{}"), GIVE_UP)
        await untrusting.aclose()
    assert len(server.requests) == 1


def test_an_endpoint_is_the_request_up_to_its_body() -> None:
    endpoint = endpoint_for(
        "https://api.example.com/v1/chat/completions?api-version=2", headers={"A": "b"}
    )
    assert (endpoint.host, endpoint.port, endpoint.tls) == ("api.example.com", 443, True)
    assert endpoint.request(b"{}") == (
        b"POST /v1/chat/completions?api-version=2 HTTP/1.1\r\nHost: api.example.com\r\n"
        b"A: b\r\nContent-Length: 2\r\n\r\n{}"
    )
    assert endpoint_for("http://[::1]:8080", headers={}).head.startswith(
        b"POST / HTTP/1.1\r\nHost: [::1]:8080\r\n"
    )


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        ("ftp://example.com/", {}),
        ("http:///no-host", {}),
        ("http://example.com/", {"Authorization": "Bearer x\r\nX-Injected: 1"}),
        ("http://example.com/", {"Bad:Name": "x"}),
    ],
)
def test_an_endpoint_refuses_what_would_not_be_one_request(
    url: str, headers: dict[str, str]
) -> None:
    with pytest.raises(ValueError):
        endpoint_for(url, headers=headers)
