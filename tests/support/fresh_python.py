"""Running a few lines in a fresh interpreter of the project's Python, from the repository."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def fresh_python(code: str, *, env: Mapping[str, str]) -> list[str]:
    """The words ``code`` prints, run with exactly ``env`` (a failure raises with its output)."""
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        check=True,
    )
    return completed.stdout.split()
