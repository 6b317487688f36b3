"""Server-sent events: the ``data`` of each event of a stream of lines."""

from __future__ import annotations

from collections.abc import AsyncIterator


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """Each event's data (its ``data:`` lines joined by newlines); comments and other fields
    are skipped. An event still unterminated when the stream ends is dropped, as the SSE
    specification says."""
    data: list[str] = []
    async for line in lines:
        if line == "":
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
