"""The replay cursor of ``connect`` (``lastSeenEventId``, ``copilot_runtime/agui/replay.py``):
``<runId>`` or ``<runId>:<seq>``; a seq that is no number this server wrote makes the whole
text a run id, which names no run, so everything is replayed (as for any unknown id)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from copilot_runtime.agui.replay import Cursor, cursor_parse
from tests.copilot_runtime.agui.helpers import post, read_events, run_body, types
from tests.copilot_runtime.agui.test_http_threads import make_thread

FIVE_THOUSAND_DIGITS = "9" * 5000


@pytest.mark.parametrize(
    ("raw", "cursor"),
    [
        ("run-1", Cursor(run_id="run-1")),
        ("run-1:7", Cursor(run_id="run-1", seq=7)),
        ("run-1:0", Cursor(run_id="run-1", seq=0)),
        (" run-1:007 ", Cursor(run_id="run-1", seq=7)),
        ("run:with:colons:3", Cursor(run_id="run:with:colons", seq=3)),
        ("run-1:2147483647", Cursor(run_id="run-1", seq=2**31 - 1)),  # the log's largest seq
    ],
)
def test_a_cursor_names_a_run_and_maybe_a_seq(raw: str, cursor: Cursor) -> None:
    assert cursor_parse(raw) == cursor


@pytest.mark.parametrize(
    "raw",
    [
        "run-1:²",  # a digit to str.isdigit, refused by int()
        "run-1:٣",  # an Arabic-indic three: int() would read 3
        "run-1:" + FIVE_THOUSAND_DIGITS,  # past int()'s 4,300 digits
        "run-1:2147483648",  # past any seq the log holds
        "run-1:+3",
        "run-1:-3",
        "run-1:1_0",
        "run-1:",
    ],
)
def test_a_seq_that_is_no_logged_seq_leaves_the_whole_text_a_run_id(raw: str) -> None:
    assert cursor_parse(raw) == Cursor(run_id=raw)


@pytest.mark.parametrize("raw", [None, "", "   ", 7, ["run-1"]])
def test_no_cursor(raw: object) -> None:
    assert cursor_parse(raw) is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("seq", ["²", FIVE_THOUSAND_DIGITS])
async def test_connect_with_a_cursor_whose_seq_is_no_number_replays_everything(seq: str) -> None:
    await sync_to_async(make_thread)("replay-cursor")
    client = AsyncClient()

    seen = await post(
        client,
        "/agent/default/connect",
        run_body("replay-cursor", [], lastSeenEventId="run-replay-cursor:1"),
    )
    unreadable = await post(
        client,
        "/agent/default/connect",
        run_body("replay-cursor", [], lastSeenEventId=f"run-replay-cursor:{seq}"),
    )

    assert seen.status_code == unreadable.status_code == 200
    assert await read_events(seen) == []  # that (finished) run was seen: nothing after it
    events = await read_events(unreadable)
    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert events[0]["runId"] == "run-replay-cursor"
