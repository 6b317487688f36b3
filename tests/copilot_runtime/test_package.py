"""Importing the runtime's packages configures nothing in a host project."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_apps_sets_no_settings_module_and_creates_no_celery_app() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    probe = (
        "import os, sys\n"
        "import copilot_runtime, conversations, agents\n"
        "print(os.environ.get('DJANGO_SETTINGS_MODULE'), 'celery' in sys.modules)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.split() == ["None", "False"]
