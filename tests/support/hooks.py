"""Request hooks the end-to-end tests register through COPILOT_RUNTIME_ON_*_REQUEST.

Each hook appends one JSON line describing the context it received to the file named by the
environment variable ``COPILOT_TEST_HOOK_LOG`` (the tests read it back), so what the served
process passed to its hooks can be checked from the test process.

Both raise *after* recording when the request's properties ask for it:
``{"failBeforeHook": true}`` makes on_before_request refuse the request,
``{"failAfterHook": true}`` makes on_after_request fail, which must not break the response.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from pathlib import Path
from typing import Any

HOOK_LOG_ENV = "COPILOT_TEST_HOOK_LOG"
FAIL_BEFORE_HOOK_PROPERTY = "failBeforeHook"
FAIL_AFTER_HOOK_PROPERTY = "failAfterHook"

# Hooks run in worker threads; one line per write must not interleave with another.
_write_lock = threading.Lock()


class HookFailure(RuntimeError):
    """Raised on purpose by the hooks below."""


def _append(hook: str, context: Any) -> None:
    path = os.environ.get(HOOK_LOG_ENV)
    if not path:
        return
    entry = {"hook": hook, **dataclasses.asdict(context)}
    line = json.dumps(entry, default=str)
    with _write_lock, Path(path).open("a", encoding="utf-8") as log:
        log.write(line + "\n")


def record_before_request(context: Any) -> None:
    _append("before", context)
    if (context.properties or {}).get(FAIL_BEFORE_HOOK_PROPERTY):
        raise HookFailure("on_before_request refused the request on purpose (tests.support.hooks)")


def record_after_request(context: Any) -> None:
    _append("after", context)
    if (context.properties or {}).get(FAIL_AFTER_HOOK_PROPERTY):
        raise HookFailure("on_after_request failed on purpose (tests.support.hooks)")


def read_hook_log(path: Path) -> list[dict[str, Any]]:
    """The entries written so far (an absent file is no entries)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
