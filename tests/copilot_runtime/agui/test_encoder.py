"""The SSE bytes: ``data: <json>\\n\\n`` per event, the token fast path equal to the slow one."""

from __future__ import annotations

import orjson

from copilot_runtime.agui.encoder import SseEncoder, sse_frame
from copilot_runtime.events import (
    ActionArgs,
    ActionEnd,
    ActionStart,
    RunFinished,
    TextDelta,
    TextEnd,
    TextStart,
)


def frames(raw: bytes) -> list[dict]:
    assert raw.endswith(b"\n\n")
    parts = raw[:-2].split(b"\n\n")
    for part in parts:
        assert part.startswith(b"data: ")
        assert b"\n" not in part  # one line per event: no event: or id: lines
    return [orjson.loads(part[len(b"data: ") :]) for part in parts]


def test_a_run_encodes_every_token_as_its_own_event() -> None:
    encoder = SseEncoder(thread_id="t-1", run_id="r-1")
    run_input = {"threadId": "t-1", "runId": "r-1", "messages": []}
    opening = encoder.start(run_input)
    body = encoder.encode(
        [
            TextStart(message_id="m1"),
            TextDelta(message_id="m1", delta='He said "hi"\n'),
            TextDelta(message_id="m1", delta="ünïcode ✓"),
            TextEnd(message_id="m1"),
            ActionStart(action_execution_id="c1", action_name="f", parent_message_id="m1"),
            ActionArgs(action_execution_id="c1", delta='{"a": 1}'),
            ActionEnd(action_execution_id="c1"),
            RunFinished(),
        ]
    )
    assert frames(opening) == [
        {"type": "RUN_STARTED", "threadId": "t-1", "runId": "r-1", "input": run_input}
    ]
    assert frames(body) == [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 'He said "hi"\n'},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "ünïcode ✓"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {
            "type": "TOOL_CALL_START",
            "toolCallId": "c1",
            "toolCallName": "f",
            "parentMessageId": "m1",
        },
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"a": 1}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "RUN_FINISHED", "threadId": "t-1", "runId": "r-1"},
    ]
    assert encoder.finished


def test_the_token_fast_path_writes_the_same_bytes_as_orjson() -> None:
    encoder = SseEncoder(thread_id="t", run_id="r")
    encoder.encode([TextStart(message_id='m"1')])
    fast = encoder.encode([TextDelta(message_id='m"1', delta="x\ty")])
    assert fast == sse_frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": 'm"1', "delta": "x\ty"})


def test_nothing_is_written_after_the_terminal_event() -> None:
    encoder = SseEncoder(thread_id="t", run_id="r")
    encoder.encode([TextStart(message_id="m1"), RunFinished(status="cancelled")])
    assert encoder.encode([TextDelta(message_id="m1", delta="late"), RunFinished()]) == b""


def test_a_stream_that_ends_without_a_terminal_event_gets_a_run_error() -> None:
    encoder = SseEncoder(thread_id="t", run_id="r")
    body = encoder.encode([TextStart(message_id="m1"), None])
    assert [event["type"] for event in frames(body)] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
    assert frames(body)[-1]["code"] == "INCOMPLETE_STREAM"


def test_resume_reopens_open_messages_and_streams_into_them() -> None:
    encoder = SseEncoder(thread_id="t", run_id="r")
    reopened = encoder.resume([TextStart(message_id="m1"), TextDelta(message_id="m1", delta="a")])
    assert frames(reopened) == [
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}
    ]
    assert frames(encoder.encode([TextDelta(message_id="m1", delta="b")])) == [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "b"}
    ]
