"""A stopped run's stream holds its bytes until the stop's answer was sent (stop_answers.py)."""

from __future__ import annotations

import asyncio
import gc

import pytest
from asgiref.sync import sync_to_async

from copilot_runtime.agui import stop_answers
from copilot_runtime.agui.stop_answers import StopAnswer, stop_answer_pending, stop_answer_wait


# Closing a response sends Django's request_finished, whose receiver looks at the thread's
# database connection: one an earlier test left on asgiref's thread is then touched.
@pytest.mark.django_db
async def test_the_stream_waits_until_the_answer_is_closed() -> None:
    answer = StopAnswer(("r-1", "r-2"))
    response = answer.response({"stopped": True})
    assert response["Content-Type"] == "application/json"
    assert response.content == b'{"stopped":true}'
    assert stop_answer_pending("r-1") and stop_answer_pending("r-2")
    waiting = asyncio.create_task(stop_answer_wait("r-1"))
    # Still held while the answer is open (a loaded machine only makes this check weaker).
    done, _ = await asyncio.wait({waiting}, timeout=0.2)
    assert not done

    await sync_to_async(response.close)()  # as Django closes it, on a thread of its own
    await asyncio.wait_for(waiting, timeout=5)
    assert not stop_answer_pending("r-1") and not stop_answer_pending("r-2")
    await stop_answer_wait("r-1")  # nothing pending: returns at once


async def test_a_dropped_answer_releases_the_streams() -> None:
    answer = StopAnswer(("r-3",))
    answer.drop()
    assert not stop_answer_pending("r-3")


async def test_an_answer_never_closed_releases_the_streams_when_collected() -> None:
    response = StopAnswer(("r-4",)).response({"stopped": False})
    assert stop_answer_pending("r-4")
    del response
    gc.collect()
    assert not stop_answer_pending("r-4")


async def test_the_wait_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stop_answers, "ANSWER_WAIT_SECONDS", 0.05)
    answer = StopAnswer(("r-5",))
    await asyncio.wait_for(stop_answer_wait("r-5"), timeout=5)  # gives up, does not hang
    answer.drop()
    assert not stop_answer_pending("r-5")
