"""RFC 6902 JSON Patch, applied to an agent's state (AG-UI ``STATE_DELTA``)."""

from __future__ import annotations

import copy
from typing import Any


class JsonPatchError(ValueError):
    """A patch operation that cannot be applied to the document."""


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise JsonPatchError(f"JSON pointer {pointer!r} does not start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in pointer[1:].split("/")]


def _index(container: list[Any], token: str, *, for_insert: bool) -> int:
    if token == "-" and for_insert:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise JsonPatchError(f"{token!r} is not an array index")
    index = int(token)
    limit = len(container) if for_insert else len(container) - 1
    if index > limit:
        raise JsonPatchError(f"array index {index} is out of range")
    return index


def _parent(document: Any, tokens: list[str]) -> Any:
    target = document
    for token in tokens[:-1]:
        if isinstance(target, dict):
            if token not in target:
                raise JsonPatchError(f"path member {token!r} does not exist")
            target = target[token]
        elif isinstance(target, list):
            target = target[_index(target, token, for_insert=False)]
        else:
            raise JsonPatchError(f"cannot descend into {type(target).__name__}")
    return target


def _get(document: Any, tokens: list[str]) -> Any:
    if not tokens:
        return document
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise JsonPatchError(f"path member {last!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_insert=False)]
    raise JsonPatchError("path does not exist")


def _add(document: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_insert=True), value)
    else:
        raise JsonPatchError("cannot add into a scalar")
    return document


def _remove(document: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise JsonPatchError("cannot remove the whole document")
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise JsonPatchError(f"path member {last!r} does not exist")
        return document, parent.pop(last)
    if isinstance(parent, list):
        return document, parent.pop(_index(parent, last, for_insert=False))
    raise JsonPatchError("cannot remove from a scalar")


def apply_patch(document: Any, operations: list[dict[str, Any]]) -> Any:
    """A patched copy of ``document`` (the original is left as it was)."""
    result = copy.deepcopy(document)
    for operation in operations:
        if not isinstance(operation, dict):
            raise JsonPatchError("each operation must be an object")
        op = operation.get("op")
        tokens = _tokens(str(operation.get("path", "")))
        if op == "add":
            result = _add(result, tokens, copy.deepcopy(operation.get("value")))
        elif op == "remove":
            result, _ = _remove(result, tokens)
        elif op == "replace":
            _get(result, tokens)  # must exist
            if tokens:
                result, _ = _remove(result, tokens)
            result = _add(result, tokens, copy.deepcopy(operation.get("value")))
        elif op in ("move", "copy"):
            source = _tokens(str(operation.get("from", "")))
            if op == "move":
                result, value = _remove(result, source)
            else:
                value = copy.deepcopy(_get(result, source))
            result = _add(result, tokens, value)
        elif op == "test":
            if _get(result, tokens) != operation.get("value"):
                raise JsonPatchError(f"test failed at {operation.get('path')!r}")
        else:
            raise JsonPatchError(f"unknown operation {op!r}")
    return result
