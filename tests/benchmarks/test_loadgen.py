"""The load generator: its multipart reader on the TypeScript runtime's exact bytes, its HTTP
client against a scripted socket server, the request it sends, and the profile grouping."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import AsyncIterator, Sequence

import pytest

from benchmarks.client_request import (
    ACCEPT,
    CLIENT_GQL_VERSION,
    http_request,
    request_body,
    user_message_text,
)
from benchmarks.loadgen import Connection, LoadPlan, Target, run_load, send_one
from benchmarks.profile_summary import component_of, parse_collapsed, summarize
from benchmarks.response_reader import (
    MultipartMixedParser,
    ResponseProtocolError,
    StreamReader,
    boundary_from_content_type,
)
from benchmarks.stats import percentile
from copilot_runtime.graphql.fastpath.documents import client_mutation_printed

# Reference 3.4 (a): the TypeScript runtime 1.10.6's answer to a short text reply, one bytes
# object per write() it made.
REFERENCE_A_WRITES: tuple[bytes, ...] = (
    b"\r\n---",
    b"\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 183\r\n\r\n"
    b'{"data":{"generateCopilotResponse":{"threadId":"thread-abc","runId":"run-from-adapter",'
    b'"extensions":null,"messages":[],"metaEvents":[],"__typename":"CopilotResponse"}},'
    b'"hasNext":true}\r\n---',
    b"\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 234\r\n\r\n"
    b'{"incremental":[{"items":[{"__typename":"TextMessageOutput","id":"msg-1",'
    b'"createdAt":"2026-11-21T21:38:11.344Z","content":[],"role":"assistant",'
    b'"parentMessageId":null}],"path":["generateCopilotResponse","messages",0]}],'
    b'"hasNext":true}\r\n---',
    b"\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 112\r\n\r\n"
    b'{"incremental":[{"items":["Hello"],"path":["generateCopilotResponse","messages",0,'
    b'"content",0]}],"hasNext":true}\r\n---',
    b"\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 113\r\n\r\n"
    b'{"incremental":[{"items":[" world"],"path":["generateCopilotResponse","messages",0,'
    b'"content",1]}],"hasNext":true}\r\n---',
    b"\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 330\r\n\r\n"
    b'{"incremental":[{"data":{"status":{"code":"Success","__typename":"SuccessResponseStatus"},'
    b'"__typename":"CopilotResponse"},"path":["generateCopilotResponse"]},{"data":{"status":'
    b'{"code":"Success","__typename":"SuccessMessageStatus"},"__typename":"TextMessageOutput"},'
    b'"path":["generateCopilotResponse","messages",0]}],"hasNext":true}\r\n---',
    b"\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 17\r\n\r\n"
    b'{"hasNext":false}\r\n---',
    b"--\r\n",
)
REFERENCE_A = b"".join(REFERENCE_A_WRITES)
# Index of the write carrying the first content item ("Hello").
FIRST_TOKEN_WRITE = 3
# Offset just past the "\r\n---" that closes the "Hello" part: the part is complete there.
HELLO_PART_COMPLETE_AT = len(b"".join(REFERENCE_A_WRITES[: FIRST_TOKEN_WRITE + 1]))


def feed_all(chunks: Sequence[bytes]) -> StreamReader:
    reader = StreamReader()
    for index, chunk in enumerate(chunks):
        reader.feed(chunk, float(index))
    return reader


def split_at(data: bytes, offsets: Sequence[int]) -> list[bytes]:
    edges = [0, *sorted(offsets), len(data)]
    return [data[start:end] for start, end in itertools.pairwise(edges)]


def assert_reference_a(reader: StreamReader) -> None:
    observation = reader.observation
    assert observation.parts == 6
    assert observation.tokens == 2
    assert observation.response_status == "Success"
    assert observation.finished
    assert observation.succeeded
    assert observation.errors == []
    assert reader.parser.closed
    assert reader.parser.pending_bytes == 0


# --- multipart reader -------------------------------------------------------------------------


def test_reference_bytes_written_as_the_typescript_runtime_wrote_them() -> None:
    reader = feed_all(REFERENCE_A_WRITES)

    assert_reference_a(reader)
    # Time is the index of the write: the first token is seen with the "Hello" write, the end
    # with the {"hasNext":false} write.
    assert reader.observation.first_token_at == FIRST_TOKEN_WRITE
    assert reader.observation.finished_at == 6


def test_reference_bytes_one_byte_at_a_time_see_the_token_when_its_part_is_complete() -> None:
    reader = feed_all([REFERENCE_A[index : index + 1] for index in range(len(REFERENCE_A))])

    assert_reference_a(reader)
    # Fed byte by byte with now = byte index: the "Hello" part counts once its closing
    # delimiter's last byte has arrived, not before (its JSON alone is not a complete part).
    assert reader.observation.first_token_at == HELLO_PART_COMPLETE_AT - 1


def test_reference_bytes_split_in_two_anywhere() -> None:
    # Every cut, in one test: as 1,458 parametrized items they cost each pytest-xdist worker
    # more to collect and report than the checks themselves take.
    for offset in range(1, len(REFERENCE_A)):
        try:
            assert_reference_a(feed_all(split_at(REFERENCE_A, [offset])))
        except AssertionError as failure:
            raise AssertionError(f"split at byte {offset}: {failure}") from failure


@pytest.mark.parametrize(
    "awkward",
    [
        b"\r",  # inside the preamble's CRLF
        b"\r\n--",  # a delimiter cut before its last dash
        b"Content-Length: 11",  # in the middle of a part's length
        b"\r\n\r",  # between the headers and the blank line
        b'"Hel',  # inside the token itself
        b"-\r\n",  # inside the close delimiter
    ],
)
def test_reference_bytes_cut_right_after_awkward_prefixes(awkward: bytes) -> None:
    offsets = []
    start = 0
    while (index := REFERENCE_A.find(awkward, start)) >= 0:
        offsets.append(index + len(awkward))
        start = index + 1
    assert offsets, "the awkward sequence occurs in the reference bytes"
    offsets = [offset for offset in offsets if 0 < offset < len(REFERENCE_A)]

    assert_reference_a(feed_all(split_at(REFERENCE_A, offsets)))


def test_reference_bytes_in_random_chunkings() -> None:
    rng = random.Random(1234)
    for _ in range(300):
        count = rng.randint(1, 40)
        offsets = rng.sample(range(1, len(REFERENCE_A)), count)
        assert_reference_a(feed_all(split_at(REFERENCE_A, offsets)))


def test_no_token_before_the_content_part() -> None:
    reader = feed_all(REFERENCE_A_WRITES[:FIRST_TOKEN_WRITE])

    assert reader.observation.first_token_at is None
    assert reader.observation.tokens == 0
    assert not reader.observation.finished


def test_a_message_item_is_not_a_token() -> None:
    # The message itself arrives as an item at path [..., "messages", 0]: not content.
    reader = feed_all(REFERENCE_A_WRITES[:FIRST_TOKEN_WRITE])

    assert reader.observation.parts == 2


def test_the_first_delimiter_may_come_without_its_crlf() -> None:
    parser = MultipartMixedParser()

    bodies = parser.feed(
        b'---\r\nContent-Type: application/json\r\n\r\n{"hasNext":false}\r\n-----\r\n'
    )

    assert bodies == [b'{"hasNext":false}']
    assert parser.closed


def test_preamble_and_epilogue_are_ignored() -> None:
    parser = MultipartMixedParser()

    bodies = parser.feed(b"ignored preamble\r\n---\r\n\r\n{}\r\n-----\r\ntrailing epilogue\r\n---")

    assert bodies == [b"{}"]
    assert parser.feed(b"\r\n\r\n{}\r\n---") == []


def test_a_wrong_content_length_is_a_protocol_error() -> None:
    broken = REFERENCE_A.replace(b"Content-Length: 112", b"Content-Length: 111")

    with pytest.raises(ResponseProtocolError, match="Content-Length 111"):
        feed_all([broken])


def test_a_failed_response_status_is_not_success() -> None:
    failed = (
        b'{"incremental":[{"data":{"status":{"code":"Failed","__typename":"FailedResponseStatus",'
        b'"reason":"UNKNOWN_ERROR","details":{"description":"boom"}},"__typename":"CopilotResponse"'
        b'},"path":["generateCopilotResponse"]}],"hasNext":false}'
    )
    reader = feed_all(
        [
            *REFERENCE_A_WRITES[:4],
            b"\r\nContent-Type: application/json; charset=utf-8\r\n\r\n" + failed + b"\r\n---",
            b"--\r\n",
        ]
    )

    observation = reader.observation
    assert observation.finished
    assert observation.tokens == 1
    assert observation.response_status == "Failed"
    assert observation.failure == "UNKNOWN_ERROR: boom"
    assert not observation.succeeded


def test_a_stream_cut_before_has_next_false_is_unfinished() -> None:
    reader = feed_all(REFERENCE_A_WRITES[:6])

    assert reader.observation.response_status == "Success"
    assert not reader.observation.finished
    assert not reader.observation.succeeded


def test_graphql_errors_in_a_part_fail_the_stream() -> None:
    payload = b'{"errors":[{"message":"nope"}],"hasNext":false}'
    reader = feed_all([b"\r\n---\r\n\r\n" + payload + b"\r\n---", b"--\r\n"])

    assert reader.observation.errors == [{"message": "nope"}]
    assert not reader.observation.succeeded


@pytest.mark.parametrize(
    ("content_type", "boundary"),
    [
        ('multipart/mixed; boundary="-"', b"-"),
        ("multipart/mixed;boundary=abc", b"abc"),
        ("multipart/mixed", b"-"),
        ("application/graphql-response+json; charset=utf-8", None),
    ],
)
def test_boundary_from_content_type(content_type: str, boundary: bytes | None) -> None:
    assert boundary_from_content_type(content_type) == boundary


# --- the request ------------------------------------------------------------------------------


def test_the_request_carries_the_real_clients_document_headers_and_variables() -> None:
    body = request_body(thread_id="thread-1", tokens=50)
    raw = http_request(host="127.0.0.1:8000", path="/api/copilotkit", body=body)

    head, _, sent_body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    assert lines[0] == "POST /api/copilotkit HTTP/1.1"
    assert headers["accept"] == ACCEPT
    assert headers["content-type"] == "application/json"
    assert headers["x-copilotkit-runtime-client-gql-version"] == CLIENT_GQL_VERSION
    assert int(headers["content-length"]) == len(sent_body)

    decoded = json.loads(sent_body)
    assert list(decoded) == ["operationName", "query", "variables"]
    assert decoded["operationName"] == "generateCopilotResponse"
    assert decoded["query"] == client_mutation_printed()
    assert decoded["variables"]["properties"] == {}
    data = decoded["variables"]["data"]
    assert data["threadId"] == "thread-1"
    assert data["runId"] is None
    assert data["metadata"] == {"requestType": "Chat"}
    assert data["messages"][0]["textMessage"] == {
        "content": user_message_text(tokens=50),
        "role": "user",
    }
    assert 'FAKE: {"tokens": 50}' in user_message_text(tokens=50)


# --- the HTTP client against a scripted server ------------------------------------------------


def chunked(pieces: Sequence[bytes]) -> bytes:
    """HTTP/1.1 chunked encoding of ``pieces``, each its own chunk."""
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


RESPONSE_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b'Content-Type: multipart/mixed; boundary="-"\r\n'
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def awkward_pieces() -> list[bytes]:
    """The reference bytes re-cut mid-delimiter and mid-JSON, as one chunk each."""
    return split_at(
        REFERENCE_A, [3, 40, 250, HELLO_PART_COMPLETE_AT - 2, 700, len(REFERENCE_A) - 2]
    )


@pytest.fixture
async def scripted_server() -> AsyncIterator[tuple[Target, list[bytes]]]:
    served: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                served.append(await reader.readexactly(length))
                writer.write(RESPONSE_HEAD)
                for piece in split_at(chunked(awkward_pieces()), [5, 77, 300, 901]):
                    writer.write(piece)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield Target(host="127.0.0.1", port=port), served
    finally:
        server.close()
        await server.wait_closed()


async def test_send_one_reads_a_chunked_multipart_answer(
    scripted_server: tuple[Target, list[bytes]],
) -> None:
    target, served = scripted_server
    connection = await Connection.open(target)
    try:
        result = await send_one(connection, target=target, tokens=2)
        again = await send_one(connection, target=target, tokens=2)
    finally:
        await connection.close()

    assert result.ok, result.error
    assert result.tokens == 2
    assert result.ttft is not None
    assert 0 <= result.ttft <= result.latency
    assert again.ok, "the keep-alive connection serves a second request"
    assert len(served) == 2
    assert json.loads(served[0])["operationName"] == "generateCopilotResponse"


async def test_send_one_flags_a_token_count_it_did_not_ask_for(
    scripted_server: tuple[Target, list[bytes]],
) -> None:
    target, _ = scripted_server
    connection = await Connection.open(target)
    try:
        result = await send_one(connection, target=target, tokens=50)
    finally:
        await connection.close()

    assert not result.ok
    assert result.error == "2 tokens received, 50 expected"


async def test_send_one_reports_a_non_streaming_answer() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = b"Server Error"
        writer.write(
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    target = Target(host="127.0.0.1", port=server.sockets[0].getsockname()[1])
    try:
        connection = await Connection.open(target)
        result = await send_one(connection, target=target, tokens=2)
        await connection.close()
    finally:
        server.close()
        await server.wait_closed()

    assert not result.ok
    assert result.error is not None
    assert "HTTP 500 text/html: Server Error" in result.error
    assert not connection.reusable


async def test_run_load_counts_requests_completed_in_the_window(
    scripted_server: tuple[Target, list[bytes]],
) -> None:
    target, served = scripted_server
    edges: list[str] = []
    plan = LoadPlan(concurrency=3, tokens=2, warmup_seconds=0.05, duration_seconds=None, requests=9)

    summary = await run_load(
        target=target,
        plan=plan,
        on_window_start=lambda: edges.append("start"),
        on_window_end=lambda: edges.append("end"),
    )

    assert edges == ["start", "end"]
    assert summary.completed == 9
    assert summary.succeeded == 9
    assert summary.failed == 0
    assert summary.tokens_per_request_mean == 2
    assert summary.requests_per_second > 0
    assert summary.ttft.p50_ms is not None
    assert len(served) >= 9  # warm-up requests are served too, but not counted


# --- statistics and profile grouping ----------------------------------------------------------


def test_percentile_interpolates() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0], 0.95) == 3.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert percentile([float(value) for value in range(101)], 0.95) == 95.0


DAPHNE_LOOP = "run (daphne/server.py:1);_run_once (asyncio/base_events.py:2)"
WORKER = "_worker (concurrent/futures/thread.py:1)"
PROFILE_LINES = [
    f"{DAPHNE_LOOP};stream (copilot_runtime/adapters/openai_adapter.py:3);"
    "aiter (httpx/_models.py:4);read (asyncio/streams.py:5) 5",
    f"{DAPHNE_LOOP};publish (copilot_runtime/runs/live.py:9);put_nowait (asyncio/queues.py:7) 3",
    f"{DAPHNE_LOOP} 2",
    f"{WORKER};run_finish (conversations/services/runs.py:2);"
    "execute (django/db/backends/utils.py:3);execute (psycopg/cursor.py:4) 4",
    f"{WORKER};encode (copilot_runtime/graphql/fastpath/encoder.py:2);"
    "dumps (orjson.cpython-311.so) 1",
    f"{WORKER};part (copilot_runtime/graphql/transport.py:2);_PyEval (libpython3.11.so.1.0) 1",
]


def test_profile_components_look_through_plumbing() -> None:
    stacks = parse_collapsed(PROFILE_LINES)
    components = [component_of(stack) for stack, _ in stacks]

    assert components == [
        "upstream HTTP client (openai, httpx, httpcore, anyio, h11)",
        "runtime code (copilot_runtime, conversations, agents)",
        "asyncio / daphne / twisted",
        "ORM / database (django.db, psycopg, libpq)",
        "JSON encode/decode (json, orjson)",
        "wire encoding (transport.py, fastpath/encoder.py)",
    ]
    breakdown = summarize(stacks)
    assert breakdown.total_samples == 16
    assert breakdown.by_component[0].samples == 5
    assert breakdown.by_own_time[0].name == "read (asyncio/streams.py)"
