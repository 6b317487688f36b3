"""Runs the real AG-UI 1.0 client (``@ag-ui/client`` 1.0.4's ``HttpAgent``, Node) against a
server: ``tests/e2e/js/agui-1.0/agui10_client.cjs`` (see its header for the shapes), through
this worker's served driver or a one-shot process, as ``agui_client.run_agui`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.js_client import _node_executable, ensure_js_clients_installed
from tests.e2e.node_driver import one_shot_forced, run_one_shot, served_driver
from tests.support.agui_schemas import assert_agui10_events

AGUI10_ROOT: Path = Path(__file__).resolve().parent / "js" / "agui-1.0"
DRIVER_SCRIPT: Path = AGUI10_ROOT / "agui10_client.cjs"


def run_agui10(command: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    """One command for the 1.0 driver. Fails when the client warned about anything or a
    server event is invalid against the AG-UI 1.0 JSON Schema."""
    ensure_js_clients_installed()
    served = None
    if not one_shot_forced():
        argv = [_node_executable(), str(DRIVER_SCRIPT), "--serve"]
        driver = served_driver(("agui-1.0",), "agui10_client.cjs", argv, AGUI10_ROOT)
        served = driver.call(command, timeout)
    if served is not None:
        result: dict[str, Any] = {**served.result, "stderr": served.stderr}
    else:
        result = run_one_shot(DRIVER_SCRIPT, command, timeout)
    assert result["warnings"] == [], result["warnings"]
    for step in result["steps"]:
        assert_agui10_events(step["raw"])
    return result
