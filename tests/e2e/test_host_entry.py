"""A ``startproject`` host on the runtime's one ASGI entry (``copilot_runtime.routing.
runtime_application``), with middleware, websocket routes and a lifespan of its own.

Each decision of copilot_runtime/endpoints/host_middleware.py is checked here, in the host: the
hot endpoints skip the project's own request log (and ``manage.py check`` says so, W010) but
get Django's security headers, its ``ALLOWED_HOSTS``, the session user with its CSRF check and
the runtime's CORS answer; ``HOT_PATHS_THROUGH_DJANGO`` sends them through the whole stack.
The host's websocket route and lifespan run beside the runtime's, the health URLs answer from
``copilot_runtime.health_urls``, and daphne (which sends no lifespan events) serves it too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import psycopg
import pytest
from websockets.sync.client import connect

from tests.conftest import ServedProcess
from tests.faults.traffic import fake, v2_run
from tests.support.generate_e2e import GRAPHQL_PATH, generate_data, text_input
from tests.support.redis_server import free_port

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcessFactory

pytestmark = pytest.mark.e2e

HOST_FILES = Path(__file__).resolve().parent / "host_entry"
BIN = Path(sys.executable).parent
PASSWORD = "host-entry-password-123"
RUN_PATH = "/api/copilotkit/agent/default/run"


@dataclass
class Host:
    site: Path
    env: dict[str, str]
    log: Path

    def manage(self, *arguments: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", *arguments],
            cwd=self.site,
            env={**self.env, **extra},
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )

    def seen(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture(scope="module")
def host_database() -> Iterator[str]:
    from tests.support.databases import own_database

    with own_database("host_entry") as url:
        yield url


@pytest.fixture(scope="module")
def host(
    tmp_path_factory: pytest.TempPathFactory,
    host_database: str,
    _fake_upstream_server: FakeUpstream,
) -> Host:
    root = tmp_path_factory.mktemp("host-entry")
    site = root / "site"
    site.mkdir()
    subprocess.run([str(BIN / "django-admin"), "startproject", "hostsite", str(site)], check=True)
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
            "    path('api/copilotkit', include('copilot_runtime.urls')),\n"
            "    path('', include('copilot_runtime.health_urls')),",
        )
    )
    shutil.copy(HOST_FILES / "asgi.py", site / "hostsite" / "asgi.py")
    shutil.copy(HOST_FILES / "probe.py", site / "hostsite" / "probe.py")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("COPILOT_RUNTIME", "DJANGO_"))},
        "HOST_DATABASE_URL": host_database,
        "FAKE_MODEL_BASE_URL": _fake_upstream_server.base_url,
        "HOST_PROBE_LOG": str(root / "probe.log"),
        "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
        "PYTHONPATH": str(site),
    }
    env.pop("REDIS_URL", None)
    found = Host(site=site, env=env, log=root / "probe.log")
    for step in (("migrate", "--noinput"), ("createsuperuser", "--noinput", "--username",
                 "admin", "--email", "a@example.com")):  # fmt: skip
        done = found.manage(*step)
        assert done.returncode == 0, done.stderr
    return found


def serve(factory: ServedProcessFactory, host: Host, server: str, **extra: str) -> ServedProcess:
    port = free_port()
    if server == "daphne":
        command = [
            str(BIN / "daphne"),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "hostsite.asgi:application",
        ]
    else:
        command = [str(BIN / "uvicorn"), "hostsite.asgi:application", "--port", str(port)]
    return factory(command, port=port, env={**host.env, **extra}, timeout=60)


def logged_in(url: str) -> httpx.Client:
    """A browser-like client with the admin's session (and its CSRF cookie)."""
    client = httpx.Client(base_url=url, timeout=30)
    page = client.get("/admin/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None
    answer = client.post(
        "/admin/login/?next=/admin/",
        data={"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)},
        headers={"referer": f"{url}/admin/login/"},
    )
    assert answer.status_code == 302, answer.text
    return client


def run_body(thread_id: str) -> dict[str, Any]:
    return {
        "threadId": thread_id, "runId": str(uuid.uuid4()), "tools": [], "context": [],
        "forwardedProps": {}, "state": {},
        "messages": [{"id": str(uuid.uuid4()), "role": "user", "content": "Hi"}],
    }  # fmt: skip


def test_the_front_honours_replaces_or_skips_each_kind_of_host_middleware(
    host: Host, served_process_factory: ServedProcessFactory
) -> None:
    web = serve(served_process_factory, host, "uvicorn")

    # The hot endpoints: served by the front, so the project's own log never sees them...
    run = v2_run(web.url, "", "host-entry-1", fake({"text": "Hello host"}))
    assert run.succeeded and run.text == "Hello host", (run.status, run.body)
    v1 = httpx.post(
        web.url + GRAPHQL_PATH,
        json={
            "query": "mutation($data: GenerateCopilotResponseInput!) {"
            " generateCopilotResponse(data: $data) { threadId } }",
            "variables": {
                "data": generate_data(thread_id="host-v1", messages=[text_input("u", "Hi")])
            },
        },
        timeout=30,
    )
    assert v1.status_code == 200 and "errors" not in v1.json(), v1.text
    # ...while Django's requests pass through it.
    assert httpx.get(f"{web.url}/api/copilotkit/info", timeout=10).status_code == 200
    seen = host.seen()
    assert "request GET /api/copilotkit/info" in seen
    assert not any(RUN_PATH in line or line.endswith(" /api/copilotkit") for line in seen)
    check = host.manage("check")
    assert "copilot_runtime.W010" in check.stderr + check.stdout
    assert "hostsite.probe.RequestLogMiddleware" in check.stderr + check.stdout

    # Honoured: SecurityMiddleware's and XFrameOptionsMiddleware's headers, ALLOWED_HOSTS.
    answered = httpx.post(f"{web.url}{RUN_PATH}", json=run_body("host-entry-2"), timeout=30)
    assert answered.status_code == 200
    assert answered.headers["x-content-type-options"] == "nosniff"
    assert answered.headers["referrer-policy"] == "same-origin"
    assert answered.headers["cross-origin-opener-policy"] == "same-origin"
    assert answered.headers["x-frame-options"] == "DENY"
    foreign = httpx.post(
        f"{web.url}{RUN_PATH}", json=run_body("host-entry-3"), headers={"host": "evil.example"}
    )
    assert foreign.status_code == 400

    # Replaced: CORS as the runtime's middleware answers it.
    cors = httpx.post(
        f"{web.url}{RUN_PATH}",
        json=run_body("host-entry-4"),
        headers={"origin": "https://app.example.com"},
        timeout=30,
    )
    assert cors.headers["access-control-allow-origin"] == "https://app.example.com"

    # Replaced: the session's user, with Django's CSRF check.
    browser = logged_in(web.url)
    try:
        refused = browser.post(RUN_PATH, json=run_body("host-entry-session"))
        assert refused.status_code == 401 and "CSRF" in refused.text
        accepted = browser.post(
            RUN_PATH,
            json=run_body("host-entry-session"),
            headers={"x-csrftoken": browser.cookies["csrftoken"]},
        )
        assert accepted.status_code == 200, accepted.text
    finally:
        browser.close()
    with psycopg.connect(host.env["HOST_DATABASE_URL"]) as db:
        owner = db.execute(
            "SELECT u.username FROM conversations_thread t JOIN auth_user u ON u.id = t.owner_id"
            " WHERE t.thread_id = 'host-entry-session'"
        ).fetchall()
    assert owner == [("admin",)]

    # The health URLs from copilot_runtime.health_urls.
    assert httpx.get(f"{web.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{web.url}/readyz", timeout=10).status_code == 200


def test_hot_paths_through_django_run_the_whole_stack(
    host: Host, served_process_factory: ServedProcessFactory
) -> None:
    web = serve(
        served_process_factory, host, "uvicorn", COPILOT_RUNTIME_HOT_PATHS_THROUGH_DJANGO="true"
    )
    run = v2_run(web.url, "", "host-through-django", fake({"text": "Through Django"}))
    assert run.succeeded and run.text == "Through Django", (run.status, run.body)
    assert f"request POST {RUN_PATH}" in host.seen()
    check = host.manage("check", COPILOT_RUNTIME_HOT_PATHS_THROUGH_DJANGO="true")
    assert "W010" not in check.stderr + check.stdout


@pytest.mark.parametrize("server", ["uvicorn", "daphne"])
def test_the_host_websocket_routes_and_lifespan_run_beside_the_runtime(
    host: Host, served_process_factory: ServedProcessFactory, server: str
) -> None:
    web = serve(served_process_factory, host, server)
    ws_url = web.url.replace("http://", "ws://")
    with connect(f"{ws_url}/ws/echo/", open_timeout=10) as echo:
        echo.send("ping")
        assert echo.recv(timeout=10) == "echo: ping"
    with connect(
        f"{ws_url}/api/copilotkit", subprotocols=["graphql-transport-ws"], open_timeout=10,
        origin=web.url,
    ) as runtime:  # fmt: skip
        runtime.send(json.dumps({"type": "connection_init", "payload": {}}))
        assert json.loads(runtime.recv(timeout=10))["type"] == "connection_ack"
    run = v2_run(web.url, "", f"host-{server}", fake({"text": f"Served by {server}"}))
    assert run.succeeded and run.text == f"Served by {server}", (run.status, run.body)
    web.stop()
    if server == "uvicorn":  # daphne sends no lifespan events
        assert "host started" in host.seen() and "host stopped" in host.seen()
