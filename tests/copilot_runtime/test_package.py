"""Importing the runtime's packages configures nothing in a host project."""

from __future__ import annotations

import os

from tests.support.fresh_python import fresh_python


def test_importing_the_apps_sets_no_settings_module_and_creates_no_celery_app() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    probe = (
        "import os, sys\n"
        "import copilot_runtime, conversations, agents\n"
        "print(os.environ.get('DJANGO_SETTINGS_MODULE'), 'celery' in sys.modules)\n"
    )
    assert fresh_python(probe, env=env) == ["None", "False"]
