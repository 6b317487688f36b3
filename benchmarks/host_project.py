"""A Django project made a host of the runtime by the README's steps, for ``make bench``'s host
row (benchmarks/host_row.py).

``build_host`` runs the venv's ``django-admin startproject`` and applies "Add it to an existing
Django project" (README.md, steps 1-4) to what it wrote: the three apps and the runtime's CORS
middleware after Django's ``SecurityMiddleware`` in ``settings.py``, startproject's other
middleware kept (what a team's project runs is what is measured), the runtime's URLs and
health URLs in ``urls.py``, and the runtime's ASGI entry in ``asgi.py``. Migrating and checking
(step 4) are the caller's (``manage_command``); step 5 (Celery) does not apply to the inline
executor the row measures. tests/e2e/test_host_entry.py builds the same kind of host for its
checks. Everything that writes the host is in ``build_host``, so that a version that takes the
steps from the documentation page itself can replace it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DJANGO_ADMIN = Path(sys.executable).parent / "django-admin"
PACKAGE = "hostsite"

# Appended to startproject's settings.py: step 1 plus what the host needs to run on the bench.
SETTINGS_ADDENDUM = """
# --- benchmarks/host_project.py: README.md, "Add it to an existing Django project" ---
import os  # noqa: E402

import dj_database_url  # noqa: E402

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS += ["copilot_runtime", "conversations", "agents"]
MIDDLEWARE.insert(1, "copilot_runtime.http.cors.RuntimeCorsMiddleware")  # after Security
# The model: OPENAI_API_KEY and OPENAI_BASE_URL from the environment (the bench's fake
# upstream). The load generator calls anonymously, as it calls the standalone site and the
# TypeScript runtimes; with DEBUG off the runtime refuses anonymous callers unless allowed.
COPILOT_RUNTIME = {"ALLOW_ANONYMOUS": True}
DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"])}
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
"""

# Appended to startproject's urls.py (step 2): added to its urlpatterns rather than edited
# into its text, which differs between Django versions (quotes, comments).
URLS_ADDENDUM = """
# --- benchmarks/host_project.py: README.md, step 2 ---
from django.urls import include  # noqa: E402

urlpatterns += [
    path("api/copilotkit", include("copilot_runtime.urls")),
    path("", include("copilot_runtime.health_urls")),  # /healthz and /readyz
]
"""

# Step 3: asgi.py as the README gives it.
ASGI_TEMPLATE = """import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "{package}.settings")
django_asgi_app = get_asgi_application()

from copilot_runtime.routing import runtime_application  # noqa: E402

application = runtime_application(django_asgi_app)
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


def build_host(directory: Path, package: str = PACKAGE) -> HostProject:
    """``django-admin startproject <package> <directory>`` with the README's steps applied."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [str(DJANGO_ADMIN), "startproject", package, str(directory)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    package_dir = directory / package
    for name, addendum in (("settings.py", SETTINGS_ADDENDUM), ("urls.py", URLS_ADDENDUM)):
        written = package_dir / name
        written.write_text(written.read_text() + addendum)
    (package_dir / "asgi.py").write_text(ASGI_TEMPLATE.format(package=package))
    return HostProject(site=directory, package=package)
