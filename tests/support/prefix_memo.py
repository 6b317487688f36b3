"""Watching a ``PrefixMemo`` (copilot_runtime/events/recent.py) resume."""

from __future__ import annotations

from typing import Any

import pytest

from copilot_runtime.events.recent import PrefixMemo


def count_resumes(monkeypatch: pytest.MonkeyPatch, memo: PrefixMemo[Any]) -> list[int]:
    """A list that receives, for each pass ``memo`` resumes, how many messages it skipped."""
    resumed: list[int] = []
    resume = memo.resume

    def counting(messages: list[Any]) -> tuple[int, Any]:
        done, kept = resume(messages)
        resumed.append(done)
        return done, kept

    monkeypatch.setattr(memo, "resume", counting)
    return resumed
