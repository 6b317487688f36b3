"""Which of the two locks this suite runs on: requirements.lock, or requirements-newest.lock
(scripts/test.sh runs the host, Celery, broker and channel-layer tests on both)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCKS = (REPO_ROOT / "requirements.lock", REPO_ROOT / "requirements-newest.lock")


def pinned(lock: Path) -> dict[str, str]:
    """The lock's pins, by normalized distribution name."""
    pins = {}
    for line in lock.read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if match:
            pins[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return pins


def suite_lock() -> Path:
    """The lock whose Django, Celery and kombu are the ones installed here."""
    installed = {name: metadata.version(name) for name in ("django", "celery", "kombu")}
    for lock in LOCKS:
        pins = pinned(lock)
        if all(pins.get(name) == version for name, version in installed.items()):
            return lock
    raise LookupError(f"no lock pins the installed {installed}")
