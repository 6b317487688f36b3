"""How output types read the values they were built from (``*_source`` private fields).

A source is either ready (a value, a list) or arrives later (an awaitable, an async iterable),
so the resolver that builds a response from the engine's event stream can hand over futures
and queues instead of waiting for them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

ItemsSource = AsyncIterable[T] | Iterable[T]


async def settle_source(owner: object, attribute: str) -> Any:
    """The value of ``owner.<attribute>``, awaiting it first if it is awaitable.

    A coroutine can only be awaited once, so it is swapped for a task on first use; the
    ``shield`` keeps a cancelled reader (a client that went away) from cancelling the
    producer's own future.
    """
    source = getattr(owner, attribute)
    if not inspect.isawaitable(source):
        return source
    if not isinstance(source, asyncio.Future):
        source = asyncio.ensure_future(source)
        setattr(owner, attribute, source)
    return await asyncio.shield(source)


async def iterate_source(source: ItemsSource[T]) -> AsyncIterator[T]:
    """Yield the items of a list or of an async iterable, as they come."""
    if isinstance(source, AsyncIterable):
        async for item in source:
            yield item
    else:
        for item in source:
            yield item
