"""Output types built from Python: scalars, derived fields, sources."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest

from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.types.enums import ResponseStatusCode
from copilot_runtime.graphql.types.scalars import format_datetime_iso, parse_datetime_iso
from copilot_runtime.graphql.types.sources import settle_source
from copilot_runtime.graphql.types.statuses import (
    FailedResponseStatus,
    FailedResponseStatusReason,
    PendingResponseStatus,
    SuccessResponseStatus,
)


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (datetime(2026, 11, 21, 21, 38, 11, 344999, tzinfo=UTC), "2026-11-21T21:38:11.344Z"),
        (datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05.000Z"),
        (
            datetime(2026, 1, 2, 3, 4, 5, 7000, tzinfo=timezone(timedelta(hours=-5))),
            "2026-01-02T08:04:05.007Z",
        ),
    ],
)
def test_datetime_iso_format(value: datetime, wire: str) -> None:
    assert format_datetime_iso(value) == wire


def test_datetime_iso_parse() -> None:
    assert parse_datetime_iso("2025-01-01T00:00:00.000Z") == datetime(2025, 1, 1, tzinfo=UTC)
    assert parse_datetime_iso("2025-01-01T00:00:00").tzinfo is UTC
    with pytest.raises(ValueError):
        parse_datetime_iso("yesterday")
    with pytest.raises(ValueError):
        parse_datetime_iso(1735689600)


def test_response_status_codes_come_from_the_class() -> None:
    assert SuccessResponseStatus().code() == ResponseStatusCode.Success
    assert PendingResponseStatus().code() == ResponseStatusCode.Pending
    failed = FailedResponseStatus(reason=FailedResponseStatusReason.UNKNOWN_ERROR, details={"a": 1})
    assert failed.code() == ResponseStatusCode.Failed


class _Holder:
    def __init__(self, source: object) -> None:
        self.source = source


async def test_a_coroutine_source_can_be_read_twice() -> None:
    calls = 0

    async def produce() -> str:
        nonlocal calls
        calls += 1
        return "done"

    holder = _Holder(produce())
    assert await settle_source(holder, "source") == "done"
    assert await settle_source(holder, "source") == "done"
    assert calls == 1


async def test_a_cancelled_reader_does_not_cancel_the_producer_future() -> None:
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    reader = asyncio.ensure_future(settle_source(_Holder(future), "source"))
    await asyncio.sleep(0)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert not future.cancelled()


async def test_plain_values_are_returned_as_they_are() -> None:
    status = SuccessResponseStatus()
    assert await settle_source(_Holder(status), "source") is status


def test_context_defaults() -> None:
    context = RuntimeContext(request=None, user=None)
    assert context.headers == {} and context.extra == {}
