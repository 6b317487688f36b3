"""Write one planned chat reply to the connection: streamed, whole, scripted error or misbehaviour.

With no token delay the events are written in batches (one `write` per batch), so fifty
concurrent streams cost little more than their bytes; with a delay each token is written and
flushed on its own, as a real model would.
"""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass

from benchmarks.fake_upstream import http1
from benchmarks.fake_upstream.payloads import (
    ChunkEncoder,
    completion_body,
    scripted_error_body,
    stream_events,
)
from benchmarks.fake_upstream.plan import ReplyPlan

# Events written per `write` call when there is no token delay.
_BATCH_EVENTS = 64


@dataclass(frozen=True, slots=True)
class ReplyIdentity:
    completion_id: str
    model: str
    created: int

    @classmethod
    def now(cls, *, completion_id: str, model: str) -> ReplyIdentity:
        return cls(completion_id=completion_id, model=model, created=int(time.time()))


class Outcome(enum.Enum):
    COMPLETED = "completed"  # the whole response was written; the connection may be reused
    CLIENT_CLOSED = "client_closed"  # the client went away first
    CUT_OFF = "cut_off"  # closed on purpose (fail_after_tokens)


async def send_reply(
    *,
    plan: ReplyPlan,
    identity: ReplyIdentity,
    stream: bool,
    include_usage: bool,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    keep_alive: bool,
) -> Outcome:
    headers = [("x-request-id", f"req_{identity.completion_id}")]
    try:
        if plan.hang_before_headers or (plan.hang and not stream):
            return await _wait_for_client_close(reader)
        if plan.error is not None:
            return await _send_error(plan, writer=writer, keep_alive=keep_alive, headers=headers)
        if not stream:
            return await _send_whole(
                plan, identity, reader=reader, writer=writer, keep_alive=keep_alive, headers=headers
            )
        writer.write(http1.stream_head(keep_alive=keep_alive, extra_headers=headers))
        if plan.hang:
            await writer.drain()
            return await _wait_for_client_close(reader)
        encoder = ChunkEncoder(
            completion_id=identity.completion_id,
            created=identity.created,
            model=identity.model,
            include_usage=include_usage,
        )
        events = stream_events(plan, encoder, include_usage=include_usage)
        return await _send_stream(plan, events, reader=reader, writer=writer)
    except ConnectionError:
        return Outcome.CLIENT_CLOSED


async def _send_error(
    plan: ReplyPlan,
    *,
    writer: asyncio.StreamWriter,
    keep_alive: bool,
    headers: list[tuple[str, str]],
) -> Outcome:
    assert plan.error is not None
    if plan.error.retry_after is not None:
        headers = [*headers, ("retry-after", f"{plan.error.retry_after:g}")]
    writer.write(
        http1.json_response(
            plan.error.status,
            scripted_error_body(plan.error),
            keep_alive=keep_alive,
            extra_headers=headers,
        )
    )
    await writer.drain()
    return Outcome.COMPLETED


async def _send_stream(
    plan: ReplyPlan,
    events: list[tuple[bytes, bool]],
    *,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> Outcome:
    cut_after = plan.fail_after_tokens
    if cut_after is not None:
        events = _truncate_after_tokens(events, cut_after)
    delay = plan.token_delay_s
    pending: list[bytes] = []
    for data, carries_token in events:
        if carries_token and delay > 0:
            await _flush(pending, writer)
            await asyncio.sleep(delay)
            if reader.at_eof():
                return Outcome.CLIENT_CLOSED
        pending.append(http1.chunk(data))
        if len(pending) >= _BATCH_EVENTS:
            await _flush(pending, writer)
            await asyncio.sleep(0)  # let the other streams have their turn
            if reader.at_eof():
                return Outcome.CLIENT_CLOSED
    if cut_after is not None:
        await _flush(pending, writer)
        return Outcome.CUT_OFF
    pending.append(http1.LAST_CHUNK)
    await _flush(pending, writer)
    return Outcome.COMPLETED


async def _send_whole(
    plan: ReplyPlan,
    identity: ReplyIdentity,
    *,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    keep_alive: bool,
    headers: list[tuple[str, str]],
) -> Outcome:
    tokens = plan.token_count if plan.fail_after_tokens is None else plan.fail_after_tokens
    if plan.token_delay_s > 0 and tokens:
        # The whole generation time passes before a non-streamed reply is sent.
        await asyncio.sleep(plan.token_delay_s * tokens)
        if reader.at_eof():
            return Outcome.CLIENT_CLOSED
    if plan.fail_after_tokens is not None:
        return Outcome.CUT_OFF
    body = completion_body(
        plan, completion_id=identity.completion_id, created=identity.created, model=identity.model
    )
    writer.write(http1.json_response(200, body, keep_alive=keep_alive, extra_headers=headers))
    await writer.drain()
    return Outcome.COMPLETED


def _truncate_after_tokens(
    events: list[tuple[bytes, bool]], tokens: int
) -> list[tuple[bytes, bool]]:
    """Keep the events up to the `tokens`-th token; never the finish chunk or [DONE]."""
    kept: list[tuple[bytes, bool]] = []
    seen = 0
    for event in events:
        _data, carries_token = event
        if carries_token:
            if seen >= tokens:
                break
            seen += 1
        elif kept:  # past the role chunk: only finish/usage/[DONE] remain
            break
        kept.append(event)
    return kept


async def _flush(pending: list[bytes], writer: asyncio.StreamWriter) -> None:
    if pending:
        writer.write(b"".join(pending))
        pending.clear()
    await writer.drain()


async def _wait_for_client_close(reader: asyncio.StreamReader) -> Outcome:
    while await reader.read(65536):
        pass  # whatever else the client sends is ignored
    return Outcome.CLIENT_CLOSED
