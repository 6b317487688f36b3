"""graphql-core 3.3 incremental results -> the 2022 payloads the CopilotKit client merges.

graphql-core emits the current draft format: ``pending: [{id, path}]``, entries that name a
pending ``id`` (plus an optional ``subPath``), and ``completed: [{id, errors?}]``. urql (the
CopilotKit 1.10 client) only merges ``@stream`` items correctly when each entry carries an
absolute ``path`` ending in the index of its first item, as graphql-yoga sends:

    {"data": {...}, "hasNext": true}
    {"incremental": [{"items": [...], "path": [..., "messages", 0]},
                     {"data": {...}, "path": [..., "messages", 0]}], "hasNext": true}
    {"hasNext": false}

so this module rewrites each payload: resolve ``id`` (+ ``subPath``) to a path, add the item
index for streams, turn failed ``completed`` entries into ``{"errors", "path"}`` entries, and
drop ``pending``, ``completed``, ``id`` and ``label``. Errors are masked by ``format_error``.

A stream's first index is the number of items its list already had when it was announced
(``initialCount``), so the converter records the length of every list it passes along.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from graphql.execution import (
    ExperimentalIncrementalExecutionResults,
    IncrementalDeferResult,
    IncrementalStreamResult,
    InitialIncrementalExecutionResult,
    SubsequentIncrementalExecutionResult,
)

from copilot_runtime.graphql.error_format import format_errors

PathKey = tuple[str | int, ...]


@dataclass
class _Pending:
    path: list[str | int]
    # For streams: index of the next item to send, known once the first items arrive.
    next_index: int | None = None


class LegacyIncrementalFormatter:
    """Stateful converter for one operation's payloads, in the order they are produced."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        # Length of every list delivered so far, by its path: a stream's starting index.
        self._list_lengths: dict[PathKey, int] = {}

    def initial(self, result: InitialIncrementalExecutionResult) -> dict[str, Any]:
        payload: dict[str, Any] = {}
        if result.errors:
            payload["errors"] = format_errors(result.errors)
        payload["data"] = result.data
        payload["hasNext"] = result.has_next
        if result.extensions:
            payload["extensions"] = result.extensions
        self._record_lists(result.data, ())
        self._announce(result.pending)
        return payload

    def subsequent(self, result: SubsequentIncrementalExecutionResult) -> dict[str, Any] | None:
        """The 2022 payload for one graphql-core payload, or None when there is nothing to say.

        New ``pending`` entries of a payload describe lists inside this payload's own data,
        so they are registered after its entries were converted.
        """
        entries: list[dict[str, Any]] = []
        for incremental in result.incremental or ():
            entry = self._convert_entry(incremental)
            if entry is not None:
                entries.append(entry)
        for completed in result.completed or ():
            pending = self._pending.pop(completed.id, None)
            if completed.errors and pending is not None:
                entries.append(
                    {"errors": format_errors(completed.errors), "path": self._error_path(pending)}
                )
        self._announce(result.pending)

        if not entries and result.has_next:
            return None
        payload: dict[str, Any] = {}
        if entries:
            payload["incremental"] = entries
        payload["hasNext"] = result.has_next
        if result.extensions:
            payload["extensions"] = result.extensions
        return payload

    # --- internals ----------------------------------------------------------------------

    def _announce(self, pending_results: Any) -> None:
        for pending in pending_results or ():
            self._pending[pending.id] = _Pending(path=list(pending.path))

    def _convert_entry(
        self, incremental: IncrementalDeferResult | IncrementalStreamResult
    ) -> dict[str, Any] | None:
        pending = self._pending.get(incremental.id)
        if pending is None:
            return None
        entry: dict[str, Any]
        if isinstance(incremental, IncrementalStreamResult):
            start = self._stream_start(pending)
            path = [*pending.path, start]
            items = incremental.items
            pending.next_index = start + len(items)
            for offset, item in enumerate(items):
                self._record_lists(item, (*pending.path, start + offset))
            entry = {"items": items, "path": path}
        else:
            path = [*pending.path, *(incremental.sub_path or ())]
            self._record_lists(incremental.data, tuple(path))
            entry = {"data": incremental.data, "path": path}
        if incremental.errors:
            entry["errors"] = format_errors(incremental.errors)
        if incremental.extensions:
            entry["extensions"] = incremental.extensions
        return entry

    def _stream_start(self, pending: _Pending) -> int:
        if pending.next_index is None:
            pending.next_index = self._list_lengths.get(tuple(pending.path), 0)
        return pending.next_index

    def _error_path(self, pending: _Pending) -> list[str | int]:
        # A failed stream points at the item that would have come next (graphql-js 16 did).
        key = tuple(pending.path)
        if pending.next_index is not None or key in self._list_lengths:
            return [*pending.path, self._stream_start(pending)]
        return pending.path

    def _record_lists(self, value: Any, path: PathKey) -> None:
        if isinstance(value, dict):
            for key, child in value.items():
                if isinstance(child, dict | list):
                    self._record_lists(child, (*path, key))
        elif isinstance(value, list):
            self._list_lengths[path] = len(value)
            for index, child in enumerate(value):
                if isinstance(child, dict | list):
                    self._record_lists(child, (*path, index))


async def legacy_payloads(
    results: ExperimentalIncrementalExecutionResults,
) -> AsyncIterator[dict[str, Any]]:
    """Yield the 2022-format payloads of an incremental execution, first to last.

    Closing this generator early (a client that went away) closes graphql-core's stream,
    which cancels the resolvers still running.
    """
    formatter = LegacyIncrementalFormatter()
    subsequent = results.subsequent_results
    try:
        yield formatter.initial(results.initial_result)
        async for result in subsequent:
            payload = formatter.subsequent(result)
            if payload is not None:
                yield payload
    finally:
        aclose = getattr(subsequent, "aclose", None)
        if aclose is not None:
            await aclose()
