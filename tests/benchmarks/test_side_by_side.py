"""The side-by-side benchmark's pieces: the conversation history each simulated user keeps, the
ratio table, the peers' install decision, and the TypeScript peers answering for real."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks import peers
from benchmarks.conversation import (
    V1,
    V2,
    Conversation,
    Turn,
    new_session,
    observe_v1_payload,
    observe_v2_event,
    send_turn,
)
from benchmarks.postgres import free_port
from benchmarks.processes import new_log_dir, start_process, wait_healthy
from benchmarks.side_by_side import flatness_schedule, project_failures, table_rows
from benchmarks.table import Row, format_table, ratio

# --- the history a user keeps -------------------------------------------------------------------

V1_PAYLOADS = [
    {"data": {"generateCopilotResponse": {"threadId": "t", "messages": []}}, "hasNext": True},
    {
        "incremental": [
            {
                "items": [
                    {
                        "__typename": "TextMessageOutput",
                        "id": "ck-a1",
                        "createdAt": "2026-01-01T00:00:00.000Z",
                        "content": [],
                        "role": "assistant",
                    }
                ],
                "path": ["generateCopilotResponse", "messages", 0],
            },
            {"items": ["t0"], "path": ["generateCopilotResponse", "messages", 0, "content", 0]},
        ],
        "hasNext": True,
    },
    {
        "incremental": [
            {"items": [" t1"], "path": ["generateCopilotResponse", "messages", 0, "content", 1]},
            {
                "data": {"status": {"code": "Success"}},
                "path": ["generateCopilotResponse"],
            },
        ],
        "hasNext": False,
    },
]


def test_a_v1_user_resends_its_history_with_the_assistants_streamed_reply() -> None:
    conversation = Conversation(V1, tokens=2)
    first = json.loads(conversation.next_body())
    turn = Turn(started_at=0.0)
    for index, payload in enumerate(V1_PAYLOADS):
        observe_v1_payload(turn, payload, now=float(index))
    conversation.remember(turn)

    second = json.loads(conversation.next_body())

    assert turn.succeeded and turn.ttft == 1.0
    messages = second["variables"]["data"]["messages"]
    assert [m.get("textMessage", {}).get("role") for m in messages] == ["user", "assistant", "user"]
    assert messages[1] == {
        "id": "ck-a1",
        "createdAt": "2026-01-01T00:00:00.000Z",
        "textMessage": {"content": "t0 t1", "role": "assistant"},
    }
    assert second["variables"]["data"]["threadId"] == first["variables"]["data"]["threadId"]


def test_a_v2_user_resends_its_history_with_a_fresh_run_id_each_turn() -> None:
    conversation = Conversation(V2, tokens=2)
    first = json.loads(conversation.next_body())
    turn = Turn(started_at=0.0)
    for index, event in enumerate(
        [
            {"type": "RUN_STARTED"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "t0"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": " t1"},
            {"type": "RUN_FINISHED"},
        ]
    ):
        observe_v2_event(turn, event, now=float(index))
    conversation.remember(turn)

    second = json.loads(conversation.next_body())

    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][1] == {"id": "m1", "role": "assistant", "content": "t0 t1"}
    assert second["threadId"] == first["threadId"] and second["runId"] != first["runId"]


@pytest.mark.parametrize("protocol", [V1, V2])
def test_a_users_request_body_is_what_the_stdlib_encoder_writes_compactly(protocol: str) -> None:
    conversation = Conversation(protocol, tokens=2)
    conversation.next_body()
    turn = Turn(started_at=0.0)
    reply = 'caf\u00e9 \u2028 \U0001f600 \\ "q" \n\t\x01 </script>'
    if protocol == V1:
        payloads = json.loads(json.dumps(V1_PAYLOADS).replace('"t0"', json.dumps(reply)))
        for index, payload in enumerate(payloads):
            observe_v1_payload(turn, payload, now=float(index))
    else:
        for index, event in enumerate(
            [
                {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": reply},
                {"type": "RUN_FINISHED"},
            ]
        ):
            observe_v2_event(turn, event, now=float(index))
    conversation.remember(turn)

    body = conversation.next_body()

    sent = json.loads(body)
    if protocol == V1:
        assistant = sent["variables"]["data"]["messages"][1]["textMessage"]["content"]
    else:
        assistant = sent["messages"][1]["content"]
    assert assistant.startswith(reply)
    assert body == json.dumps(json.loads(body), separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize("protocol", [V1, V2])
def test_a_body_floor_pads_the_body_with_a_field_neither_protocol_reads(protocol: str) -> None:
    plain, padded = Conversation(protocol, tokens=2), Conversation(protocol, tokens=2)
    padded.thread_id = plain.thread_id
    padded.body_floor = 5_000

    unpadded_body, padded_body = plain.next_body(), padded.next_body()

    assert len(padded_body) == padded.last_body_size == 5_000
    assert plain.last_body_size == len(unpadded_body) < 5_000
    request, padded_request = json.loads(unpadded_body), json.loads(padded_body)
    if protocol == V1:  # graphql-yoga refuses unknown top-level parameters
        assert set(padded_request.pop("extensions")) == {"padding"}
    else:
        assert set(padded_request.pop("padding")) == {"x"}
    for body in (request, padded_request):  # the fresh ids and clocks aside, the same request
        messages = body["variables"]["data"]["messages"] if protocol == V1 else body["messages"]
        for message in messages:
            message.pop("id", None)
            message.pop("createdAt", None)
        body.pop("runId", None)
    assert padded_request == request
    padded.body_floor = 10  # a floor below the body's size leaves it as it is
    assert b"padding" not in padded.next_body()


def test_a_run_error_is_a_failed_turn() -> None:
    turn = Turn(started_at=0.0)
    observe_v2_event(turn, {"type": "RUN_ERROR", "code": "X", "message": "boom"}, now=1.0)

    assert not turn.succeeded and turn.failure == "X: boom"


# --- the table ------------------------------------------------------------------------------------


def test_the_ratio_says_how_many_times_better_the_project_is() -> None:
    faster = Row("r", "req/s", ts=100.0, ours=300.0, higher_is_better=True)
    leaner = Row("r", "CPU", ts=30.0, ours=10.0, higher_is_better=False)
    missing = Row("r", "CPU", ts=None, ours=10.0, higher_is_better=False)

    assert ratio(faster) == 3.0 and ratio(leaner) == 3.0 and ratio(missing) is None
    table = format_table([faster, leaner, missing])
    assert "3.00x" in table and table.splitlines()[-1].rstrip().endswith("-")


def test_the_machine_figures_beside_a_load_are_shown_without_a_ratio() -> None:
    figures = {
        "req_s": 100.0,
        "ttft_p50_ms": 5.0,
        "ttft_p95_ms": 9.0,
        "cpu_ms_per_req": 6.0,
        "peak_rss_mib": 110.0,
        "failures": 0,
        "loadgen_cpu_ms_per_req": 1.0,
        "fake_cpu_ms_per_req": 0.5,
        "postgres_cpu_ms_per_req": 11.0,
        "machine_busy_pct": 97.0,
    }
    results = {"args": {"users": 50}, "rows": {f"conv_{V1}": {"ts": figures, "ours": figures}}}

    rows = {row.metric: row for row in table_rows(results)}

    assert rows["PostgreSQL CPU ms/req"].ours == 11.0
    assert rows["machine busy %"].ts == 97.0
    assert ratio(rows["machine busy %"]) is None and ratio(rows["req/s"]) == 1.0
    line = next(ln for ln in format_table(list(rows.values())).splitlines() if "busy" in ln)
    assert line.split()[-1] == "-"


def test_the_exit_status_counts_the_projects_failures_not_the_typescript_runtimes() -> None:
    results = {
        "rows": {
            "paced_1000": {"ts": {"failures": 40}, "ours": {"failures": 0}},
            "celery": {
                "hop": {"inline": {"failures": 0}, "celery": {"failures": 0}},
                "loaded": {"ts": {"failures": 3}, "celery": {"failures": 0}},
            },
        }
    }
    assert project_failures(results) == 0

    results["rows"]["celery"]["loaded"]["celery"]["failures"] = 2
    results["rows"]["paced_1000"]["ours"]["failures"] = 1
    assert project_failures(results) == 3


# --- a turn that fails without saying why -------------------------------------------------------


@pytest.mark.parametrize("protocol", [V1, V2])
def test_an_answer_ending_without_a_final_status_is_a_failure_that_shows_it(
    protocol: str,
) -> None:
    # A GraphQL error answered as plain JSON (a busy thread) is no stream: the failure names
    # the content type and what came last, where it used to be an empty string.
    answer = b'{"errors":[{"message":"This thread is busy"}]}'

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer)
        )
        await writer.drain()
        writer.close()

    async def one_turn() -> Turn:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with new_session(1) as session:
                conversation = Conversation(protocol, tokens=5)
                return await send_turn(session, f"http://127.0.0.1:{port}", conversation)
        finally:
            server.close()

    turn = asyncio.run(one_turn())
    assert not turn.succeeded
    assert turn.failure.startswith("ended without a final status (application/json)")
    assert "This thread is busy" in turn.failure


# --- the one-thread row ------------------------------------------------------------------------


def test_the_one_thread_row_measures_turns_2_to_11_twice_and_the_last_ten_in_turn() -> None:
    steps = flatness_schedule(120)

    def turn_numbers(thread: str, window: str) -> list[int]:
        numbers, count = [], 0
        for name, measured in steps:
            if name == thread:
                count += 1
                if measured == window:
                    numbers.append(count)
        return numbers

    assert sum(1 for name, _ in steps if name == "long") == 120
    assert turn_numbers("short", "early") == list(range(2, 12))
    assert turn_numbers("sized", "early_sized") == list(range(2, 12))
    assert turn_numbers("long", "late") == list(range(111, 121))
    measured = [window for _, window in steps if window is not None]
    assert len(measured) == 30
    # Each window goes first, second and third about as often.
    for window in ("early", "early_sized", "late"):
        places = [measured[i : i + 3].index(window) for i in range(0, 30, 3)]
        assert sorted(set(places)) == [0, 1, 2], (window, places)
    # Nothing measured before the long thread reached its window.
    first_measured = next(i for i, (_, window) in enumerate(steps) if window is not None)
    assert first_measured == 112


# --- installing the peers ------------------------------------------------------------------------


def test_the_peers_are_installed_again_only_when_the_lock_is_newer(tmp_path: Path) -> None:
    (tmp_path / "package-lock.json").write_text("{}")
    assert peers.needs_install(tmp_path)
    marker = tmp_path / "node_modules" / ".package-lock.json"
    marker.parent.mkdir()
    marker.write_text("{}")
    now = time.time()
    os.utime(tmp_path / "package-lock.json", (now - 10, now - 10))
    assert not peers.needs_install(tmp_path)
    os.utime(tmp_path / "package-lock.json", (now + 10, now + 10))
    assert peers.needs_install(tmp_path)


# --- the real TypeScript runtimes -------------------------------------------------------------


# On a fresh machine the peer's npm install comes first (minutes).
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("kind", "protocol"), [(peers.V1, V1), (peers.V2, V2)])
def test_each_typescript_peer_answers_a_conversation_on_the_fake_upstream(
    kind: str, protocol: str, fake_upstream: Any
) -> None:
    peers.ensure_installed(kind)
    port = free_port()
    command = peers.peer_command(kind, port=port, upstream_base_url=fake_upstream.base_url)
    env = {**os.environ, "LOG_LEVEL": "warn", "COPILOTKIT_TELEMETRY_DISABLED": "true"}
    managed = start_process(f"ts-{kind}", command, env=env, log_dir=new_log_dir())
    try:
        wait_healthy(managed, f"http://127.0.0.1:{port}/healthz", timeout=60)

        async def two_turns() -> list[Turn]:
            async with new_session(1) as session:
                conversation = Conversation(protocol, tokens=5)
                return [
                    await send_turn(session, f"http://127.0.0.1:{port}", conversation)
                    for _ in range(2)
                ]

        turns = asyncio.run(two_turns())
    finally:
        managed.stop()

    assert [turn.failure for turn in turns] == ["", ""]
    assert all(turn.succeeded and "".join(turn.text) == "t0 t1 t2 t3 t4" for turn in turns)
    # The second request carried the first exchange: the upstream saw the whole history.
    last = fake_upstream.requests()[-1]
    assert [m["role"] for m in last["messages"] if m["role"] != "system"] == [
        "user",
        "assistant",
        "user",
    ]
