"""Agent state as RFC 6902 JSON Patch (AG-UI ``STATE_DELTA``), on the ``jsonpatch`` library.

Both directions use it: an AG-UI agent's deltas are applied to the state the runtime keeps for
it, and the v2 stream sends a client the delta from the state it holds instead of a whole
snapshot when that is smaller.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import jsonpointer


class JsonPatchError(ValueError):
    """A patch that is malformed or does not apply to the document."""


def apply_patch(document: Any, operations: list[dict[str, Any]]) -> Any:
    """``document`` with ``operations`` applied; the original is left untouched."""
    try:
        return jsonpatch.apply_patch(document, operations, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise JsonPatchError(str(exc)) from exc
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        # A structurally broken operation (not a dict, a non-string path...).
        raise JsonPatchError(f"invalid patch operation: {exc}") from exc


def patch_between(before: Any, after: Any) -> list[dict[str, Any]]:
    """The operations that turn ``before`` into ``after`` (empty when they are equal)."""
    return jsonpatch.make_patch(before, after).patch
