"""The load generator's v2 side: the frontend core's run request and the SSE reader, on bytes
shaped like the TypeScript runtime 1.75's answer, and one exchange with a scripted server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from benchmarks.agui_request import AGENT_RUN_PATH, http_request, request_body, run_path
from benchmarks.loadgen import AGUI, Connection, Target, send_one
from benchmarks.sse_reader import AguiStreamReader, SseParser, is_event_stream

# Protocol reference 4.3: a short text reply from the TypeScript runtime 1.75.
REFERENCE_SSE = (
    b'data: {"type":"RUN_STARTED","threadId":"t-1","runId":"r-1"}\n\n'
    b'data: {"type":"TEXT_MESSAGE_START","messageId":"msg-1","role":"assistant"}\n\n'
    b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":"Hello"}\n\n'
    b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":" world"}\n\n'
    b'data: {"type":"TEXT_MESSAGE_END","messageId":"msg-1"}\n\n'
    b'data: {"type":"RUN_FINISHED","threadId":"t-1","runId":"r-1"}\n\n'
)


def test_the_run_request_is_the_frontend_cores() -> None:
    body = json.loads(request_body(thread_id="t-1", tokens=7))
    assert list(body) == [
        "threadId",
        "runId",
        "tools",
        "context",
        "forwardedProps",
        "state",
        "messages",
    ]
    assert body["threadId"] == "t-1"
    [message] = body["messages"]
    assert message["role"] == "user"
    assert 'FAKE: {"tokens": 7}' in message["content"]
    raw = http_request(host="h:1", path=run_path("/api/copilotkit"), body=b"{}")
    head = raw.split(b"\r\n\r\n", 1)[0].decode()
    assert head.startswith(f"POST /api/copilotkit{AGENT_RUN_PATH} HTTP/1.1")
    assert "accept: text/event-stream" in head
    assert "content-type: application/json" in head


@pytest.mark.parametrize("size", [1, 2, 7, 64, len(REFERENCE_SSE)])
def test_the_reader_sees_the_same_run_in_any_chunking(size: int) -> None:
    reader = AguiStreamReader()
    for index, start in enumerate(range(0, len(REFERENCE_SSE), size)):
        reader.feed(REFERENCE_SSE[start : start + size], float(index))
    observation = reader.observation
    assert observation.succeeded
    assert observation.tokens == 2
    assert observation.content_items == 2
    assert observation.first_token_at is not None
    assert observation.first_token_at <= observation.finished_at


def test_a_run_error_ends_the_run_as_failed() -> None:
    reader = AguiStreamReader()
    reader.feed(
        b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
        b'data: {"type":"RUN_ERROR","message":"upstream 500","code":"UPSTREAM_ERROR"}\n\n',
        1.0,
    )
    observation = reader.observation
    assert observation.finished
    assert not observation.succeeded
    assert observation.failure == "UPSTREAM_ERROR: upstream 500"


def test_multi_line_data_and_other_fields_are_read_as_the_client_reads_them() -> None:
    parser = SseParser()
    assert parser.feed(b': comment\nevent: x\ndata: {"a":\ndata: 1}\n\n') == [b'{"a":\n1}']
    assert is_event_stream("text/event-stream; charset=utf-8")
    assert not is_event_stream("multipart/mixed")


@pytest.fixture
async def sse_server() -> AsyncIterator[tuple[Target, list[bytes]]]:
    served: list[bytes] = []
    reply = REFERENCE_SSE.replace(b'"Hello"', b'"t0"').replace(b'" world"', b'" t1"')

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                served.append(head + await reader.readexactly(length))
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                )
                for start in range(0, len(reply), 50):
                    piece = reply[start : start + 50]
                    writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield Target(host="127.0.0.1", port=port, protocol=AGUI), served
    finally:
        server.close()
        await server.wait_closed()


async def test_send_one_runs_over_agui_on_a_keep_alive_connection(
    sse_server: tuple[Target, list[bytes]],
) -> None:
    target, served = sse_server
    connection = await Connection.open(target)
    try:
        result = await send_one(connection, target=target, tokens=2)
        again = await send_one(connection, target=target, tokens=2)
    finally:
        await connection.close()

    assert result.ok, result.error
    assert again.ok, again.error
    assert result.tokens == 2
    assert result.ttft is not None
    assert served[0].startswith(b"POST /api/copilotkit/agent/default/run HTTP/1.1")


def test_an_unknown_protocol_is_refused() -> None:
    with pytest.raises(ValueError, match="protocol"):
        Target(host="h", port=1, protocol="soap")
