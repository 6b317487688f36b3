"""What changed between two agent state snapshots (top-level keys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conversations.admin.rendering import json_text


@dataclass(frozen=True, slots=True)
class StateChange:
    key: str
    change: str  # added, removed, changed
    before: str
    after: str


def state_changes(before: dict[str, Any] | None, after: dict[str, Any]) -> list[StateChange]:
    """Every top-level key added, removed or changed; values as indented JSON text."""
    before = before or {}
    changes = []
    for key in sorted(set(before) | set(after), key=str):
        if key not in before:
            changes.append(StateChange(str(key), "added", "", json_text(after[key])))
        elif key not in after:
            changes.append(StateChange(str(key), "removed", json_text(before[key]), ""))
        elif before[key] != after[key]:
            changes.append(
                StateChange(str(key), "changed", json_text(before[key]), json_text(after[key]))
            )
    return changes
