"""The runtime added to a brand-new Django project by following the README alone.

Builds the wheel, installs it into a fresh virtualenv (at the versions of requirements.lock),
creates a project with ``django-admin startproject``, applies the README's steps (apps and
middleware, ``path("api/copilotkit", include("copilot_runtime.urls"))``, the ASGI application
with the websocket routes), migrates on PostgreSQL, serves it with uvicorn, and drives it with
the real CopilotKit clients (v1 and v2) and the admin's session inspector in Chromium.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest

from tests.e2e.agui_client import run_agui
from tests.e2e.js_client import JS_CLIENT_VERSIONS, run_js
from tests.e2e.test_inspector_browser import drive_browser
from tests.support.generate_e2e import generate_command, generate_data, text_input

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST_FILES = Path(__file__).resolve().parent / "host"
PASSWORD = "host-admin-password-123"


def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    assert completed.returncode == 0, f"{command} failed:\n{completed.stdout}\n{completed.stderr}"
    return completed


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def host_database() -> Iterator[str]:
    """A database of its own on the suite's PostgreSQL, dropped afterwards."""
    admin_url = os.environ["DATABASE_URL"]
    name = f"host_e2e_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(admin_url)
    yield urlunsplit(parts._replace(path=f"/{name}"))
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def build_wheel(out: Path) -> Path:
    # setuptools builds in the source tree's build/: start from an empty one, so nothing left
    # from an earlier build (a file since moved or deleted) can slip into the wheel.
    shutil.rmtree(REPO_ROOT / "build", ignore_errors=True)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(REPO_ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
        ],
    )
    shutil.rmtree(REPO_ROOT / "build", ignore_errors=True)
    [wheel] = out.glob("copilot_runtime_django-*.whl")
    return wheel


def test_a_startproject_site_becomes_a_copilotkit_backend_by_the_readme(
    tmp_path: Path, host_database: str, fake_upstream: FakeUpstream
) -> None:
    wheel = build_wheel(tmp_path / "dist")
    names = zipfile.ZipFile(wheel).namelist()
    # The apps' templates ship in the wheel (the admin pages answered 500 without them).
    assert "conversations/templates/admin/conversations/thread/inspect.html" in names
    assert "copilot_runtime/templates/copilot_runtime/demo/chat.html" in names

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            "-c",
            str(REPO_ROOT / "requirements.lock"),
            str(wheel),
        ],
        timeout=600,
    )

    site = tmp_path / "site"
    site.mkdir()
    run([str(venv / "bin" / "django-admin"), "startproject", "hostsite", str(site)])
    settings = site / "hostsite" / "settings.py"
    settings.write_text(
        settings.read_text() + "\n" + (HOST_FILES / "settings_addendum.txt").read_text()
    )
    urls = site / "hostsite" / "urls.py"
    urls.write_text(
        urls.read_text()
        .replace("from django.urls import path", "from django.urls import include, path")
        .replace(
            "    path('admin/', admin.site.urls),",
            "    path('admin/', admin.site.urls),\n"
            "    path('api/copilotkit', include('copilot_runtime.urls')),",
        )
    )
    assert "copilot_runtime.urls" in urls.read_text()
    shutil.copy(HOST_FILES / "asgi.py", site / "hostsite" / "asgi.py")

    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("COPILOT_RUNTIME", "DJANGO_"))},
        "HOST_DATABASE_URL": host_database,
        "FAKE_MODEL_BASE_URL": fake_upstream.base_url,
        "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
        "PYTHONPATH": "",
    }
    manage = [str(python), "manage.py"]
    run([*manage, "migrate", "--noinput"], cwd=site, env=env, timeout=300)
    checked = run([*manage, "check"], cwd=site, env=env)
    assert "no issues" in checked.stdout
    run(
        [
            *manage,
            "createsuperuser",
            "--noinput",
            "--username",
            "admin",
            "--email",
            "a@example.com",
        ],
        cwd=site,
        env=env,
    )

    port = free_port()
    log = (tmp_path / "uvicorn.log").open("wb")
    server = subprocess.Popen(
        [str(venv / "bin" / "uvicorn"), "hostsite.asgi:application", "--port", str(port)],
        cwd=site,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/api/copilotkit/info", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, (
                tmp_path / "uvicorn.log"
            ).read_text()
            time.sleep(0.2)

        # v1: the real GraphQL client.
        thread_id = f"host-{uuid.uuid4()}"
        data = generate_data(
            thread_id=thread_id,
            messages=[text_input("u1", 'FAKE: {"text": "Hello from the host"}')],
        )
        v1 = run_js(JS_CLIENT_VERSIONS[0], generate_command(url, data))
        assert v1["errors"] == []
        assert v1["final"]["status"]["code"] == "Success"

        # v2: the real frontend core.
        v2 = run_agui(
            {
                "runtimeUrl": f"{url}/api/copilotkit",
                "agentId": "default",
                "threadId": f"host-v2-{uuid.uuid4()}",
                "steps": [
                    {
                        "op": "run",
                        "message": {"id": "u1", "content": 'FAKE: {"text": "And over v2"}'},
                    }
                ],
            }
        )
        assert v2["errors"] == []
        assert [m["content"] for m in v2["messages"] if m["role"] == "assistant"] == ["And over v2"]

        # The admin's session inspector, in Chromium.
        with psycopg.connect(host_database) as connection:
            [(thread_pk,)] = connection.execute(
                "SELECT id FROM conversations_thread WHERE thread_id = %s", [thread_id]
            ).fetchall()
        browsed = drive_browser(
            {
                "baseUrl": url,
                "username": "admin",
                "password": PASSWORD,
                "screenshotDir": str(tmp_path / "screens"),
                "pages": [
                    {
                        "name": "host-inspector",
                        "path": f"/admin/conversations/thread/{thread_pk}/inspect/",
                    }
                ],
            }
        )
        [page] = browsed["pages"]
        assert page["status"] == 200
        assert any("Hello from the host" in entry["text"] for entry in page["transcriptEntries"])
    finally:
        server.terminate()
        server.wait(timeout=10)
