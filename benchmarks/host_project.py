"""A Django project made a host of the runtime by the documented steps, for ``make bench``'s
host row (benchmarks/host_row.py).

``build_host`` runs the venv's ``django-admin startproject mysite`` and applies the marked code
blocks of docs/adding-to-a-project.md (benchmarks/host_recipe.py), the same blocks
tests/e2e/test_host_project.py builds its host from: the settings appended, ``urls.py``,
``asgi.py``, ``celery.py`` and ``__init__.py`` written. startproject's middleware is kept (what
a team's project runs is what is measured). Without ``REDIS_URL`` the recipe's settings serve
runs in the web process, the inline executor the row measures. Then the bench's own few lines,
which a production settings file has in some form: ``DEBUG`` off, the hosts it answers, and
anonymous callers allowed (the load generator calls anonymously, as it calls the standalone
site and the TypeScript runtimes). Migrating and checking are the caller's
(``manage_command``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from benchmarks.host_recipe import PACKAGE, recipe_blocks, write_host

DJANGO_ADMIN = Path(sys.executable).parent / "django-admin"

# After the recipe's settings: what the bench itself needs of the host.
BENCH_SETTINGS = """
# --- benchmarks/host_project.py: the bench's own ---
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
COPILOT_RUNTIME["ALLOW_ANONYMOUS"] = True
"""


@dataclass(frozen=True)
class HostProject:
    """A built host: where startproject wrote it and the names it is served and managed by."""

    site: Path  # startproject's directory: manage.py and the package
    package: str = PACKAGE

    @property
    def application(self) -> str:
        return f"{self.package}.asgi:application"

    @property
    def settings_module(self) -> str:
        return f"{self.package}.settings"

    def environment(self, base: Mapping[str, str], *, database_url: str) -> dict[str, str]:
        """``base`` (the bench's environment) for this host. Its settings module is set
        explicitly: the bench's names the standalone site's, and asgi.py and manage.py only
        set it when unset. The site's directory goes on the import path so that uvicorn and
        daphne find the package whatever their working directory."""
        path = [str(self.site), *filter(None, [base.get("PYTHONPATH")])]
        return {
            **base,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": self.settings_module,
            "PYTHONPATH": os.pathsep.join(path),
        }

    def manage_command(self, *arguments: str) -> list[str]:
        """``python manage.py ...``, to run from ``site``."""
        return [sys.executable, "manage.py", *arguments]


def build_host(directory: Path) -> HostProject:
    """``django-admin startproject mysite <directory>`` with the documented steps applied."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [str(DJANGO_ADMIN), "startproject", PACKAGE, str(directory)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    package_dir = write_host(directory, recipe_blocks())
    settings = package_dir / "settings.py"
    settings.write_text(settings.read_text() + BENCH_SETTINGS)
    return HostProject(site=directory, package=PACKAGE)
