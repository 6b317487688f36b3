"""Errors on the websocket look as they do on HTTP (``graphql.error_format.format_error``):
CopilotKit errors keep their message and CopilotKit ``extensions`` (``code``: ``NOT_FOUND``,
``THREAD_BUSY``...), request errors get ``BAD_REQUEST``, anything unexpected is masked.

Strawberry's protocol handlers serialise each error with ``GraphQLError.formatted``, so the
results they receive from the schema carry errors whose ``formatted`` is ours.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from graphql import GraphQLError
from strawberry.types.execution import ExecutionResult
from strawberry.utils.aio import aclosing

from copilot_runtime.graphql.error_format import format_error


class FormattedError(GraphQLError):
    """A GraphQLError whose ``formatted`` is what ``format_error`` made of the original."""

    def __init__(self, original: GraphQLError) -> None:
        super().__init__(
            original.message,
            nodes=original.nodes,
            source=original.source,
            positions=original.positions,
            path=original.path,
            original_error=original.original_error,
            extensions=original.extensions,
        )
        self._formatted = format_error(original)

    @property
    def formatted(self) -> dict[str, Any]:  # type: ignore[override]
        return self._formatted


def _reformat(result: Any) -> Any:
    if isinstance(result, ExecutionResult) and result.errors:
        result.errors = [
            error if isinstance(error, FormattedError) else FormattedError(error)
            for error in result.errors
        ]
    return result


async def _reformatted(source: AsyncGenerator[Any, None]) -> AsyncGenerator[Any, None]:
    async with aclosing(source):
        async for result in source:
            yield _reformat(result)


class ErrorFormattingSchema:
    """Stands in for the schema in the protocol handlers (which call ``stream`` and
    ``subscribe``); everything else is delegated to the real schema."""

    def __init__(self, schema: Any) -> None:
        self._schema = schema

    def __getattr__(self, name: str) -> Any:
        return getattr(self._schema, name)

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        return _reformatted(await self._schema.stream(*args, **kwargs))

    async def subscribe(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        return _reformatted(await self._schema.subscribe(*args, **kwargs))
