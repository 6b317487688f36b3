"""Watching the passes over a known history resume (copilot_runtime/history/known.py)."""

from __future__ import annotations

from typing import Any

import pytest

from copilot_runtime.history import KnownHistory


def count_resumes(monkeypatch: pytest.MonkeyPatch, form: str) -> list[int]:
    """A list that receives, for each pass of ``form`` resumed from a known history, how many
    messages it skipped."""
    resumed: list[int] = []
    resume = KnownHistory.resume

    def counting(self: KnownHistory, name: str, messages: list[Any]) -> tuple[int, Any]:
        done, state = resume(self, name, messages)
        if name == form:
            resumed.append(done)
        return done, state

    monkeypatch.setattr(KnownHistory, "resume", counting)
    return resumed
