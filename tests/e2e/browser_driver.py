"""The admin's browser tests' drivers (``tests/e2e/js/browser/*.cjs``): Playwright's library
driving Debian's Chromium, one command on stdin, one JSON result on stdout."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.js_client import ensure_js_clients_installed

BROWSER_DIR = Path(__file__).resolve().parent / "js" / "browser"
CHROMIUM = Path("/usr/bin/chromium")


def run_browser_script(script: str, command: dict[str, Any]) -> dict[str, Any]:
    """``command`` through ``js/browser/<script>``; its result."""
    assert CHROMIUM.exists(), "Debian's chromium is missing: scripts/test.sh installs it"
    ensure_js_clients_installed()
    node = shutil.which("node")
    assert node is not None
    completed = subprocess.run(
        [node, str(BROWSER_DIR / script)],
        cwd=BROWSER_DIR,
        input=json.dumps(command),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, f"browser driver failed:\n{completed.stderr}"
    result: dict[str, Any] = json.loads(completed.stdout)
    return result
