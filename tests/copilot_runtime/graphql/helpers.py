"""Shared helpers: run documents through the executor, merge payloads as urql does."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from copilot_runtime.graphql.context import RuntimeContext
from copilot_runtime.graphql.execution import PreparedOperation, prepare_operation

DOCUMENTS_DIR = Path(__file__).parent / "documents"
REFERENCE_SDL_PATH = Path(__file__).parent / "copilotkit_1_10_6.graphql"

# One payload must arrive well within this; a hang fails the test instead of blocking it.
PAYLOAD_TIMEOUT_SECONDS = 5.0


def document(name: str) -> str:
    """A client document: ``<name>.graphql`` (CopilotKit source) or ``<name>.urql.graphql``."""
    return (DOCUMENTS_DIR / f"{name}.graphql").read_text()


def prepare(
    query: str, variables: dict[str, Any] | None = None, operation_name: str | None = None
) -> PreparedOperation:
    prepared = prepare_operation(query=query, variables=variables, operation_name=operation_name)
    assert isinstance(prepared, PreparedOperation), prepared
    return prepared


async def execute_single(
    context: RuntimeContext,
    query: str,
    variables: dict[str, Any] | None = None,
    operation_name: str | None = None,
) -> dict[str, Any]:
    result = await prepare(query, variables, operation_name).execute(context)
    assert isinstance(result, dict), f"expected one result, got {result!r}"
    return result


async def execute_stream(
    context: RuntimeContext,
    query: str,
    variables: dict[str, Any] | None = None,
    operation_name: str | None = None,
) -> AsyncIterator[dict[str, Any]]:
    result = await prepare(query, variables, operation_name).execute(context)
    assert not isinstance(result, dict), f"expected incremental payloads, got {result!r}"
    return result


async def next_payload(stream: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    return await asyncio.wait_for(anext(stream), PAYLOAD_TIMEOUT_SECONDS)


async def collect(stream: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    payloads = []
    while True:
        try:
            payloads.append(await next_payload(stream))
        except StopAsyncIteration:
            return payloads


# --- urql's merge (@urql/core 5.2.0 ``mergeResultPatch``/``deepMerge``), in Python ---------


def _deep_merge(target: Any, source: Any) -> Any:
    if isinstance(target, list):
        merged = list(target)
        for index, item in enumerate(source):
            if index < len(merged):
                merged[index] = _deep_merge(merged[index], item)
            else:
                merged.append(_deep_merge(None, item))
        return merged
    if isinstance(target, dict):
        merged_dict = dict(target)
        for key, value in source.items():
            merged_dict[key] = _deep_merge(merged_dict.get(key), value)
        return merged_dict
    return source


def _set_index(container: list[Any], index: int, value: Any) -> None:
    # JavaScript arrays grow (with holes) when written past their end.
    while len(container) <= index:
        container.append(None)
    container[index] = value


def _child(part: Any, prop: str | int) -> Any:
    if isinstance(part, list):
        return part[prop] if isinstance(prop, int) and prop < len(part) else None
    return part.get(prop)


def _assign(part: Any, prop: str | int, value: Any) -> None:
    if isinstance(part, list):
        assert isinstance(prop, int), f"string key {prop!r} into a list"
        _set_index(part, prop, value)
    else:
        part[prop] = value


def urql_merge(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """The client's final ``{"data", "errors", "hasNext"}`` after merging every payload.

    Mirrors urql: the first payload gives ``data``; each ``incremental`` entry walks its
    ``path`` (copying containers), then writes ``items`` from the index in the last path
    element (0 when it is not a number), or deep-merges ``data`` at the path.
    """
    first, *rest = payloads
    data = copy.deepcopy(first.get("data"))
    errors: list[dict[str, Any]] = list(first.get("errors") or [])
    has_next = first.get("hasNext", False)
    for payload in rest:
        incremental = payload.get("incremental") or []
        with_data: dict[str, Any] = {"data": data}
        for patch in incremental:
            errors.extend(patch.get("errors") or [])
            part: Any = with_data
            prop: str | int = "data"
            for segment in patch.get("path", []):
                current = _child(part, prop)
                copied = list(current) if isinstance(current, list) else dict(current or {})
                _assign(part, prop, copied)
                part, prop = copied, segment
            if patch.get("items"):
                start = prop if isinstance(prop, int) and prop >= 0 else 0
                for offset, item in enumerate(patch["items"]):
                    _assign(part, start + offset, _deep_merge(_child(part, start + offset), item))
            elif "data" in patch:
                _assign(part, prop, _deep_merge(_child(part, prop), patch["data"]))
        data = with_data["data"]
        if payload.get("hasNext") is not None:
            has_next = payload["hasNext"]
    return {"data": data, "errors": errors, "hasNext": has_next}
