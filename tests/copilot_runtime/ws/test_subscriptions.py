"""Subscriptions over the real websocket application: copilotStream, runEvents, stopRun."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings

from conversations.models import Run, RunEvent, RunStatus
from copilot_runtime.auth import do_issue_token
from tests.copilot_runtime.ws.conftest import (
    COPILOT_STREAM,
    LEGACY,
    RUN_EVENTS,
    RUNTIME_SETTINGS,
    STOP_RUN,
    TRANSPORT,
    OpenSocket,
    fake,
    generate_data,
    payloads_of,
    run_ended,
    wait_until,
)

pytestmark = pytest.mark.django_db(transaction=True)

BOTH_PROTOCOLS = pytest.mark.parametrize("protocol", [TRANSPORT, LEGACY])
# Long enough to act on while it streams, even on a busy box: 120 x 40 ms = 4.8 s.
SLOW_REPLY = {"tokens": 120, "delay_ms": 40}


async def _logged(run_id: str) -> list[dict[str, Any]]:
    rows = RunEvent.objects.filter(run_id=run_id).order_by("seq")
    return [{"sequence": row.seq, "type": row.type, "raw": row.payload} async for row in rows]


def _as_logged(payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"sequence": p["sequence"], "type": p["type"], "raw": p["raw"]} for p in payloads]


def _text(payloads: list[dict[str, Any]]) -> str:
    return "".join(p["delta"] for p in payloads if p["type"] == "text_delta")


async def _token_for(user: Any) -> str:
    _token, raw = await sync_to_async(do_issue_token)(user=user, name="ws-test")
    return raw


async def _upstream_stats_when(upstream: Any, condition: Any) -> dict[str, int]:
    async def probe() -> dict[str, int] | None:
        stats = await sync_to_async(upstream.stats)()
        return stats if condition(stats) else None

    return await wait_until(probe, what="the fake upstream's counters")


async def _started_run_id(socket: Any, operation_id: str) -> str:
    """Wait for the stream's first payload and return its run id."""
    (first,) = await socket.results(operation_id, 1)
    return first["data"]["copilotStream"]["runId"]


# --- copilotStream ---------------------------------------------------------------------------


@BOTH_PROTOCOLS
async def test_copilot_stream_delivers_the_whole_logged_run(
    protocol: str, open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    socket = await open_socket(protocol)
    assert socket.subprotocol == protocol
    assert (await socket.init())["type"] == "connection_ack"

    await socket.subscribe("1", COPILOT_STREAM, {"data": generate_data("Say hi")})
    messages = await socket.until_done("1")

    assert messages[-1]["type"] == "complete"
    payloads = payloads_of(messages, "copilotStream")
    assert [p["sequence"] for p in payloads] == list(range(1, len(payloads) + 1))
    types = [p["type"] for p in payloads]
    assert types[0] == "generation_start"
    assert types[-1] == "run_finished"
    assert {"text_start", "text_delta", "text_end", "generation_end"} <= set(types)
    assert _text(payloads) == "You said: Say hi"
    run_id = payloads[0]["runId"]
    assert {p["runId"] for p in payloads} == {run_id}
    assert len({p["threadId"] for p in payloads}) == 1
    start = next(p for p in payloads if p["type"] == "text_start")
    assert start["message"] == {
        "__typename": "TextMessageOutput",
        "id": start["messageId"],
        "role": "assistant",
        "content": [],
        "parentMessageId": None,
    }
    assert payloads[-1]["status"] == {"__typename": "SuccessResponseStatus", "code": "Success"}

    run = await run_ended(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.protocol == "graphql-ws"
    assert _as_logged(payloads) == await _logged(run_id)


async def test_completing_a_copilot_stream_cancels_its_run(
    open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    socket = await open_socket(TRANSPORT)
    await socket.init()
    await socket.subscribe("1", COPILOT_STREAM, {"data": generate_data(fake(SLOW_REPLY))})
    run_id = await _started_run_id(socket, "1")
    await socket.results("1", 3)

    await socket.complete("1")

    run = await run_ended(run_id)
    assert run.status == RunStatus.CANCELLED
    assert run.output_tokens < SLOW_REPLY["tokens"]
    stats = await _upstream_stats_when(runtime_on_fake, lambda s: s["active"] == 0)
    assert stats["client_closed"] == 1, stats
    logged = await _logged(run_id)
    assert logged[-1]["type"] == "run_finished"
    assert logged[-1]["raw"] == {"status": "cancelled"}


_HOOK_ENTERED: list[str] = []


async def slow_before_request(context: Any) -> None:
    """An ON_BEFORE_REQUEST hook that holds the turn's preparation for a second."""
    import asyncio

    _HOOK_ENTERED.append(context.run_id)
    await asyncio.sleep(1.0)


async def test_completing_a_copilot_stream_during_its_preparation_stops_its_run(
    open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    hook = f"{__name__}.slow_before_request"
    with override_settings(
        COPILOT_RUNTIME={
            **RUNTIME_SETTINGS,
            "OPENAI_API_KEY": "test",
            "OPENAI_BASE_URL": runtime_on_fake.base_url,
            "ON_BEFORE_REQUEST": hook,
        }
    ):
        _HOOK_ENTERED.clear()
        socket = await open_socket(TRANSPORT)
        await socket.init()
        await socket.subscribe("1", COPILOT_STREAM, {"data": generate_data(fake(SLOW_REPLY))})

        async def preparing() -> str | None:
            return _HOOK_ENTERED[0] if _HOOK_ENTERED else None

        run_id = await wait_until(preparing, what="the turn's preparation to begin")
        await socket.complete("1")  # while the hook still holds the preparation

        run = await run_ended(run_id)
    assert run.status == RunStatus.CANCELLED
    assert run.output_tokens < SLOW_REPLY["tokens"]


async def test_a_legacy_stop_cancels_the_run_even_when_the_socket_closes_right_after(
    open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    # subscriptions-transport-ws's close(): `stop` for each operation, then the socket closes.
    socket = await open_socket(LEGACY)
    await socket.init()
    await socket.subscribe("1", COPILOT_STREAM, {"data": generate_data(fake(SLOW_REPLY))})
    run_id = await _started_run_id(socket, "1")

    await socket.complete("1")
    await socket.close()

    assert (await run_ended(run_id)).status == RunStatus.CANCELLED


@BOTH_PROTOCOLS
async def test_a_dropped_connection_lets_the_run_finish(
    protocol: str, open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    socket = await open_socket(protocol)
    await socket.init()
    reply = {"tokens": 30, "delay_ms": 20}
    await socket.subscribe("1", COPILOT_STREAM, {"data": generate_data(fake(reply))})
    run_id = await _started_run_id(socket, "1")

    await socket.close()  # no complete/stop: the connection just goes away

    run = await run_ended(run_id)
    assert run.status == RunStatus.SUCCEEDED
    assert run.output_tokens == reply["tokens"]
    logged = await _logged(run_id)
    assert logged[-1]["raw"] == {"status": "succeeded"}


async def test_a_dropped_connection_cancels_when_on_disconnect_says_so(
    open_socket: OpenSocket, fake_upstream: Any
) -> None:
    settings = {
        **RUNTIME_SETTINGS,
        "OPENAI_API_KEY": "test",
        "OPENAI_BASE_URL": fake_upstream.base_url,
        "ON_DISCONNECT": {"subscription": "cancel"},
    }
    with override_settings(COPILOT_RUNTIME=settings):
        socket = await open_socket(TRANSPORT)
        await socket.init()
        await socket.subscribe("1", COPILOT_STREAM, {"data": generate_data(fake(SLOW_REPLY))})
        run_id = await _started_run_id(socket, "1")

        await socket.close()

        assert (await run_ended(run_id)).status == RunStatus.CANCELLED


async def test_a_busy_thread_is_an_error_for_that_operation_only(
    open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    socket = await open_socket(TRANSPORT)
    await socket.init()
    data = generate_data(fake(SLOW_REPLY), thread_id="busy-thread")
    await socket.subscribe("1", COPILOT_STREAM, {"data": data})
    run_id = await _started_run_id(socket, "1")

    await socket.subscribe(
        "2", COPILOT_STREAM, {"data": generate_data("again", thread_id="busy-thread")}
    )
    messages = await socket.until_done("2")

    assert messages[-1]["type"] == "error"
    (error,) = messages[-1]["payload"]
    assert error["extensions"]["code"] == "THREAD_BUSY"
    assert "still answering" in error["message"]
    await socket.complete("1")
    await run_ended(run_id)


# --- runEvents --------------------------------------------------------------------------------


async def _finished_run(open_socket: OpenSocket, text: str, **init: Any) -> str:
    socket = await open_socket(TRANSPORT)
    await socket.init(init or None)
    await socket.subscribe("run", COPILOT_STREAM, {"data": generate_data(text)})
    payloads = payloads_of(await socket.until_done("run"), "copilotStream")
    run_id = payloads[0]["runId"]
    await run_ended(run_id)
    await socket.close()
    return run_id


@BOTH_PROTOCOLS
async def test_run_events_replays_a_finished_run_exactly_as_logged(
    protocol: str, open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    run_id = await _finished_run(open_socket, fake({"tokens": 25}))

    socket = await open_socket(protocol)
    await socket.init()
    await socket.subscribe("replay", RUN_EVENTS, {"runId": run_id})
    replay = payloads_of(await socket.until_done("replay"), "runEvents")

    assert _as_logged(replay) == await _logged(run_id)
    assert replay[-1]["status"]["code"] == "Success"
    assert _text(replay) == " ".join(f"t{i}" for i in range(25))

    await socket.subscribe("tail", RUN_EVENTS, {"runId": run_id, "afterSequence": 3})
    tail = payloads_of(await socket.until_done("tail"), "runEvents")
    assert _as_logged(tail) == (await _logged(run_id))[3:]


async def test_run_events_attached_mid_run_gets_the_backlog_then_live_events(
    open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    streamer = await open_socket(TRANSPORT)
    await streamer.init()
    await streamer.subscribe("1", COPILOT_STREAM, {"data": generate_data(fake(SLOW_REPLY))})
    run_id = await _started_run_id(streamer, "1")
    await wait_until(
        lambda: RunEvent.objects.filter(run_id=run_id, type="text_delta").acount(),
        what="some deltas logged",
    )

    attached = await open_socket(LEGACY)
    await attached.init()
    await attached.subscribe("a", RUN_EVENTS, {"runId": run_id})
    assert (await Run.objects.aget(pk=run_id)).status == RunStatus.RUNNING
    replay = payloads_of(await attached.until_done("a"), "runEvents")

    logged = await _logged(run_id)
    assert _as_logged(replay) == logged
    assert [p["sequence"] for p in replay] == list(range(1, len(logged) + 1))
    await streamer.until_done("1")


@BOTH_PROTOCOLS
async def test_another_users_run_is_answered_like_an_unknown_run(
    protocol: str, open_socket: OpenSocket, runtime_on_fake: Any, user: Any, other_user: Any
) -> None:
    run_id = await _finished_run(open_socket, "mine", token=await _token_for(user))

    socket = await open_socket(protocol)
    assert (await socket.init({"token": await _token_for(other_user)}))["type"] == (
        "connection_ack"
    )
    await socket.subscribe("theirs", RUN_EVENTS, {"runId": run_id})
    theirs = await socket.until_done("theirs")
    await socket.subscribe("unknown", RUN_EVENTS, {"runId": "no-such-run"})
    unknown = await socket.until_done("unknown")

    assert [m["type"] for m in theirs] == ["error"]
    assert theirs[0]["payload"] == unknown[0]["payload"]
    errors = theirs[0]["payload"]
    error = errors[0] if isinstance(errors, list) else errors
    assert error["message"] == "Run not found"
    assert error["extensions"]["code"] == "NOT_FOUND"
    assert run_id not in str(theirs)

    # The owner may attach; an anonymous caller may not.
    owner = await open_socket(protocol)
    await owner.init({"authorization": f"Bearer {await _token_for(user)}"})
    await owner.subscribe("own", RUN_EVENTS, {"runId": run_id})
    assert (await owner.until_done("own"))[-1]["type"] == "complete"
    anonymous = await open_socket(protocol)
    await anonymous.init()
    await anonymous.subscribe("anon", RUN_EVENTS, {"runId": run_id})
    assert (await anonymous.until_done("anon"))[0]["payload"] == unknown[0]["payload"]


async def test_run_events_of_a_run_refused_before_it_executed_ends(
    open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    from conversations.models import Thread

    thread = await Thread.objects.acreate(thread_id="refused-thread")
    run = await Run.objects.acreate(
        id="refused-run", thread=thread, status=RunStatus.FAILED, error_code="HOOK"
    )
    socket = await open_socket(TRANSPORT)
    await socket.init()
    await socket.subscribe("1", RUN_EVENTS, {"runId": run.pk})

    messages = await socket.until_done("1", wait_seconds=8)

    assert [m["type"] for m in messages] == ["complete"]


# --- stopRun ----------------------------------------------------------------------------------


async def test_stop_run_from_another_connection_cancels_the_run(
    open_socket: OpenSocket, runtime_on_fake: Any, user: Any, other_user: Any
) -> None:
    token = await _token_for(user)
    streamer = await open_socket(LEGACY)
    await streamer.init({"token": token})
    await streamer.subscribe("1", COPILOT_STREAM, {"data": generate_data(fake(SLOW_REPLY))})
    run_id = await _started_run_id(streamer, "1")

    intruder = await open_socket(TRANSPORT)
    await intruder.init({"token": await _token_for(other_user)})
    await intruder.subscribe("s", STOP_RUN, {"runId": run_id})
    refused = await intruder.until_done("s")
    assert refused[0]["type"] == "next"
    assert refused[0]["payload"]["errors"][0]["message"] == "Run not found"
    assert refused[0]["payload"]["errors"][0]["extensions"]["code"] == "NOT_FOUND"

    stopper = await open_socket(TRANSPORT)
    await stopper.init({"token": token})
    await stopper.subscribe("s", STOP_RUN, {"runId": run_id})
    stopped = await stopper.until_done("s")
    assert stopped[0]["payload"] == {"data": {"stopRun": True}}

    streamed = payloads_of(await streamer.until_done("1"), "copilotStream")
    final = streamed[-1]
    assert final["type"] == "run_finished"
    assert final["status"]["__typename"] == "FailedResponseStatus"
    assert final["status"]["reason"] == "UNKNOWN_ERROR"
    assert final["status"]["details"]["code"] == "CANCELLED"
    assert (await run_ended(run_id)).status == RunStatus.CANCELLED

    await stopper.subscribe("again", STOP_RUN, {"runId": run_id})
    assert (await stopper.until_done("again"))[0]["payload"] == {"data": {"stopRun": False}}


# --- documents --------------------------------------------------------------------------------


@BOTH_PROTOCOLS
async def test_bad_documents_get_an_error_for_their_operation_and_the_socket_stays_open(
    protocol: str, open_socket: OpenSocket, runtime_on_fake: Any
) -> None:
    socket = await open_socket(protocol)
    await socket.init()

    await socket.subscribe("syntax", "subscription { runEvents(runId: ")
    syntax = await socket.until_done("syntax")
    await socket.subscribe("unknown-field", "subscription { nope }")
    unknown_field = await socket.until_done("unknown-field")

    for messages in (syntax, unknown_field):
        assert [m["type"] for m in messages] == ["error"]
        payload = messages[0]["payload"]
        error = payload[0] if isinstance(payload, list) else payload
        assert error["extensions"]["code"] == "BAD_REQUEST"
    assert "Syntax Error" in str(syntax[0]["payload"])
    assert "nope" in str(unknown_field[0]["payload"])

    await socket.subscribe("ok", RUN_EVENTS, {"runId": "missing"})
    assert (await socket.until_done("ok"))[0]["type"] == "error"  # still served


async def test_an_operation_aliasing_the_turn_field_is_refused_on_the_socket_too(
    open_socket: Any, runtime_on_fake: Any
) -> None:
    # graphql-transport-ws runs mutations (the legacy protocol refuses them outright).
    from copilot_runtime.graphql.validation import one_turn_message

    socket = await open_socket(TRANSPORT)
    assert (await socket.init())["type"] == "connection_ack"
    turn = "generateCopilotResponse(data: $data) { threadId }"
    query = f"mutation M($data: GenerateCopilotResponseInput!) {{ a: {turn} b: {turn} }}"

    await socket.subscribe("1", query, {"data": generate_data("hi")})
    [message] = await socket.until_done("1")

    assert message["type"] == "error"
    assert [error["message"] for error in message["payload"]] == [one_turn_message(2)]
    assert await Run.objects.acount() == 0
