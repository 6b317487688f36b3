"""Runs the real CopilotKit GraphQL client (Node) against a server, for end-to-end tests.

The work happens in ``tests/e2e/js/gql_client.cjs``; this module only installs the pinned client
versions and exchanges one JSON command / one JSON result with a Node process: this worker's
served driver for the version (``tests/e2e/node_driver.py``), or a one-shot process when that
one is busy or ``E2E_NODE_ONE_SHOT=1``.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.e2e.node_driver import (
    JsClientError,
    ServedDriver,
    node_executable,
    one_shot_forced,
    served_driver,
)

JS_CLIENT_VERSIONS: tuple[str, ...] = ("1.10.6", "1.74.0")

JS_ROOT: Path = Path(__file__).resolve().parent / "js"
DRIVER_SCRIPT: Path = JS_ROOT / "gql_client.cjs"
INSTALL_SCRIPT: Path = JS_ROOT / "install.sh"

_install_lock = threading.Lock()
_installed = False


# The name the other helpers import.
_node_executable = node_executable


def ensure_js_clients_installed() -> None:
    """Install the pinned client packages (npm ci) once per process; later calls are free."""
    global _installed
    with _install_lock:
        if _installed:
            return
        completed = subprocess.run(
            ["bash", str(INSTALL_SCRIPT)],
            cwd=JS_ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if completed.returncode != 0:
            raise JsClientError(
                f"{INSTALL_SCRIPT} failed (exit {completed.returncode}):\n"
                f"{completed.stdout}\n{completed.stderr}"
            )
        _installed = True


def run_js(version: str, command: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    """Send one command to the driver using runtime-client-gql ``version``; return its result.

    Raises JsClientError (with Node's stderr) if Node fails, times out or prints no JSON.
    Errors the *client* reports (GraphQL errors, HTTP failures) are part of the result instead.
    """
    if version not in JS_CLIENT_VERSIONS:
        raise ValueError(f"unknown client version {version!r}; expected {JS_CLIENT_VERSIONS}")
    ensure_js_clients_installed()
    # None: the served driver is busy with another thread's command; run this one on its own.
    served = None if one_shot_forced() else served_gql_driver(version).call(command, timeout)
    if served is not None:
        return served.result
    try:
        completed = subprocess.run(
            [_node_executable(), str(DRIVER_SCRIPT), "--version", version],
            cwd=JS_ROOT,
            input=json.dumps(command),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as timeout_error:
        raise JsClientError(
            f"gql_client.cjs ({version}) timed out after {timeout}s for op "
            f"{command.get('op')!r}; stderr:\n{_as_text(timeout_error.stderr)}"
        ) from timeout_error
    if completed.returncode != 0:
        raise JsClientError(
            f"gql_client.cjs ({version}) exited with {completed.returncode}; stderr:\n"
            f"{completed.stderr}\nstdout:\n{completed.stdout}"
        )
    try:
        result: dict[str, Any] = json.loads(completed.stdout)
    except json.JSONDecodeError as decode_error:
        raise JsClientError(
            f"gql_client.cjs ({version}) printed no JSON result; stdout:\n{completed.stdout}\n"
            f"stderr:\n{completed.stderr}"
        ) from decode_error
    return result


def served_gql_driver(version: str) -> ServedDriver:
    """This process's served driver for client ``version`` (started by its first call)."""
    argv = [_node_executable(), str(DRIVER_SCRIPT), "--version", version, "--serve"]
    return served_driver(("gql", version), f"gql_client.cjs ({version})", argv, JS_ROOT)


def _as_text(output: str | bytes | None) -> str:
    if output is None:
        return ""
    if isinstance(output, bytes):
        return output.decode("utf-8", errors="replace")
    return output
