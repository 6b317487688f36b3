"""Runs the real CopilotKit v2 frontend core (Node) against a server, for end-to-end tests.

The work happens in ``tests/e2e/js/agui/agui_client.cjs`` (see its header for the command and
result shapes); this module installs the pinned packages and exchanges one JSON command and one
JSON result with a Node process: this worker's served driver (``tests/e2e/node_driver.py``), or
a one-shot process when that one is busy or ``E2E_NODE_ONE_SHOT=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.js_client import JsClientError, _node_executable, ensure_js_clients_installed
from tests.e2e.node_driver import ServedDriver, one_shot_forced, run_one_shot, served_driver

AGUI_ROOT: Path = Path(__file__).resolve().parent / "js" / "agui"
DRIVER_SCRIPT: Path = AGUI_ROOT / "agui_client.cjs"


def run_agui(command: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    """One command for the v2 driver; raises JsClientError when Node fails or prints no JSON.
    What the client itself reports (errors, HTTP statuses) is part of the result, and
    ``result["stderr"]`` is what the client printed while running the command. Fails when an
    event the server sent is invalid against ``@ag-ui/core`` 0.0.59's schemas, or the client
    warned about anything once connected."""
    result = _run_agui(command, timeout)
    assert result["schemaErrors"] == [], result["schemaErrors"]
    if result.get("connection") == "connected":
        # What the client made of the runtime's answers (a command that never reached a
        # runtime warns about that, as tests of the driver itself want).
        assert result["warnings"] == [], result["warnings"]
    return result


def _run_agui(command: dict[str, Any], timeout: float) -> dict[str, Any]:
    ensure_js_clients_installed()
    # None: the served driver is busy with another thread's command; run this one on its own.
    served = None if one_shot_forced() else served_agui_driver().call(command, timeout)
    if served is not None:
        return {**served.result, "stderr": served.stderr}
    return run_one_shot(DRIVER_SCRIPT, command, timeout)


def served_agui_driver() -> ServedDriver:
    """This process's served v2 driver (started by its first call)."""
    argv = [_node_executable(), str(DRIVER_SCRIPT), "--serve"]
    return served_driver(("agui",), "agui_client.cjs", argv, AGUI_ROOT)


def step_types(step: dict[str, Any]) -> list[str]:
    return [event["type"] for event in step["events"]]


def sse_frames(text: str) -> list[dict[str, Any]]:
    """The events of a raw SSE body, checking it is ``data: <json>`` frames only."""
    frames = [frame for frame in text.split("\n\n") if frame]
    events = []
    for frame in frames:
        assert frame.startswith("data: "), frame
        assert "\n" not in frame, frame
        events.append(json.loads(frame[len("data: ") :]))
    return events


DEMO_PAGE_SCRIPT: Path = AGUI_ROOT / "demo_page.cjs"
CHROMIUM = Path("/usr/bin/chromium")


def run_demo_page(
    command: dict[str, Any], *, screenshot_name: str | None = None, timeout: float = 90
) -> dict[str, Any]:
    """Drive the demo chat page in headless Chromium (see ``demo_page.cjs`` for the shapes).
    With ``screenshot_name`` and ``SCREENSHOT_DIR`` set (scripts/test.sh sets it), the page
    is saved there as ``<screenshot_name>.png`` at the end."""
    screenshot_dir = os.environ.get("SCREENSHOT_DIR")
    if screenshot_name and screenshot_dir:
        command = {**command, "screenshot": str(Path(screenshot_dir) / f"{screenshot_name}.png")}
    if not CHROMIUM.exists():
        raise JsClientError(f"{CHROMIUM} is missing: apt-get install -y chromium")
    ensure_js_clients_installed()
    try:
        completed = subprocess.run(
            [_node_executable(), str(DEMO_PAGE_SCRIPT)],
            cwd=AGUI_ROOT,
            input=json.dumps(command),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        raise JsClientError(f"demo_page.cjs timed out after {timeout}s") from expired
    if completed.returncode != 0:
        raise JsClientError(
            f"demo_page.cjs exited with {completed.returncode}; stderr:\n{completed.stderr}"
        )
    result: dict[str, Any] = json.loads(completed.stdout)
    return result
