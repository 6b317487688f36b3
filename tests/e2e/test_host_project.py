"""A brand-new Django project made a CopilotKit backend from docs/adding-to-a-project.md alone.

The recipe's code blocks are taken from the document itself (benchmarks/host_recipe.py).
Marking scheme: a line ``<!-- host: KEY -->`` directly before a fenced block marks it; the keys
are ``wheel`` (sh: how the wheel is built and installed), ``settings.py append`` (python:
appended to startproject's settings.py), ``urls.py``, ``asgi.py``, ``celery.py`` and
``__init__.py`` (python: the whole file of the ``mysite`` package), ``setup`` (sh: commands run
in the project directory in order), ``web`` and ``worker`` (sh: the long-running commands). A
key missing, unknown or repeated, or a marker without its block, fails the test.

The test builds the package's wheel (``pip wheel``, offline: the file the ``wheel`` block
names), installs it into a fresh virtualenv at the versions of requirements.lock, runs
``django-admin startproject mysite``, writes the recipe's files, runs its ``setup`` commands,
then its ``worker`` and ``web`` commands (uvicorn given a free ``--port``). What it substitutes
comes only through environment variables the recipe's settings read: ``DATABASE_URL`` (a
PostgreSQL database of its own on the suite's server), ``REDIS_URL`` (``TEST_REDIS_URL`` with a
database number of its own, so the recipe's Celery executor and worker are used),
``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` (the fake upstream). It then checks a v1 turn (the
real GraphQL client), a v2 run (the real frontend core), a websocket subscription (the real
graphql-ws client), each executed by the worker and priced from the seeded prices, the health
URLs, the admin's static files, the session inspector in Chromium, and what the recipe says of
``runserver``, of a try-out without DATABASE_URL and REDIS_URL, and of static files with DEBUG off.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
import redis

from benchmarks.host_recipe import (
    PACKAGE,
    RecipeError,
    commands,
    recipe_blocks,
    write_host,
)
from tests.conftest import REPO_ROOT
from tests.e2e.agui_client import run_agui
from tests.e2e.js_client import JS_CLIENT_VERSIONS, ensure_js_clients_installed, run_js
from tests.e2e.test_inspector_browser import drive_browser
from tests.e2e.test_subscriptions_real_clients import COPILOT_STREAM, TRANSPORT, WsClientRun
from tests.support.generate_e2e import generate_command, generate_data, text_input
from tests.support.locks import suite_lock
from tests.support.redis_server import free_port

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

PASSWORD = "host-admin-password-123"
# The host's Redis database on the suite's server: apart from the Celery e2e modules' (1, 2, ...,
# one per module) and the engine tests' (11-14).
REDIS_DATABASE = 10
START_TIMEOUT_SECONDS = 60.0
STOP_TIMEOUT_SECONDS = 15.0
PRICED_TIMEOUT_SECONDS = 15.0
# Celery's log line (-l info) for a run task that ended: its run's status, or its runs'.
TASK_SUCCEEDED = re.compile(
    r"Task copilot\.execute_runs?\[[0-9a-f-]+\] succeeded in [^:]+: ('\w*'|\[[^\]\n]*\])"
)
HOST_TASK_SUCCEEDED = re.compile(r"Task mysite\.note\[[0-9a-f-]+\] succeeded in [^:]+: 'noted'")
# The environment of the host's commands drops what this process's own settings read.
DROPPED_PREFIXES = ("COPILOT_RUNTIME", "DJANGO_", "CELERY_", "OPENAI_")
DROPPED = ("DATABASE_URL", "REDIS_URL", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")

# The host's own task, beside the runtime's (appended to the recipe's celery.py): its argument
# is a datetime, which kombu's JSON carries as a marked type, and it is acknowledged late and
# rate-limited, as a host's ordinary task may be. The fast lane must leave all of that alone.
HOST_TASK = """

import datetime as _dt
import json as _json
from pathlib import Path as _Path


@app.task(name="mysite.note", acks_late=True, rate_limit="50/s")
def note(path, when):
    _Path(path).write_text(_json.dumps({"when": when.isoformat(), "type": type(when).__name__}))
    return "noted"
"""
SEND_HOST_TASK = """
import datetime, sys
from mysite.celery import note
when = datetime.datetime(2026, 12, 7, 5, 0, tzinfo=datetime.timezone.utc)
note.delay(sys.argv[1], when)
"""

# With DEBUG off WhiteNoise serves STATIC_ROOT only (what collectstatic filled), not the apps.
STATIC_WITH_DEBUG_OFF = """
import asyncio, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
from django.conf import settings
settings.DEBUG = False
import django
django.setup()
from django.http import HttpResponseNotFound
from django.test import RequestFactory
from copilot_runtime.http.static import StaticFilesMiddleware

async def not_found(request):
    return HttpResponseNotFound()

middleware = StaticFilesMiddleware(not_found)
response = asyncio.run(middleware(RequestFactory().get("/static/admin/css/base.css")))
print(response.status_code, response["Content-Type"])
"""


# --- the package and the project -------------------------------------------------------------


def run(
    command: list[str], *, timeout: float = 120, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=timeout, **kwargs
    )
    assert completed.returncode == 0, f"{command} failed:\n{completed.stdout}\n{completed.stderr}"
    return completed


def build_wheel(out: Path) -> Path:
    # setuptools builds in the source tree's build/: start from an empty one, so nothing left
    # from an earlier build (a file since moved or deleted) can slip into the wheel.
    shutil.rmtree(REPO_ROOT / "build", ignore_errors=True)
    try:
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
    finally:
        shutil.rmtree(REPO_ROOT / "build", ignore_errors=True)
    [wheel] = out.glob("copilot_runtime_django-*.whl")
    return wheel


def fresh_venv(root: Path, wheel: Path) -> Path:
    """A new virtualenv with the wheel installed at the versions of the lock this suite runs
    on (tests/support/locks.py); its bin."""
    venv = root / "venv"
    # Without a pip of its own (ensurepip takes seconds): this process's pip installs into it
    # (``--python``), as a venv's own would.
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--disable-pip-version-check",
            "-q",
            # Python compiles what the host imports when it first does: pip compiling every
            # module of every package is a third of the install.
            "--no-compile",
            "-c",
            str(suite_lock()),
            str(wheel),
        ],
        timeout=600,
        # Not this checkout on the path: its *.egg-info would pass for the package installed.
        env={name: value for name, value in os.environ.items() if name != "PYTHONPATH"},
    )
    return venv / "bin"


def host_env(bin_dir: Path, **variables: str) -> dict[str, str]:
    """The host's commands' environment: the venv first on PATH, none of this process's
    settings, then ``variables``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(DROPPED_PREFIXES) and name not in DROPPED
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **variables}


def resolved(command: list[str], env: Mapping[str, str]) -> list[str]:
    """The command with its program found on the environment's PATH (the venv's first)."""
    program = shutil.which(command[0], path=env["PATH"])
    assert program is not None, f"{command[0]} is not on the host's PATH"
    return [program, *command[1:]]


@contextlib.contextmanager
def started(command: list[str], *, cwd: Path, env: Mapping[str, str], log: Path) -> Iterator[Any]:
    """A long-running command in its own process group, its output in ``log``; stopped (SIGTERM,
    then SIGKILL) on the way out."""
    with log.open("wb") as output:
        process = subprocess.Popen(
            resolved(command, env),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT_SECONDS)


def wait_until(ready: Any, *, process: subprocess.Popen[bytes], log: Path, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not ready():
        assert process.poll() is None, f"{what} exited:\n{log.read_text(errors='replace')}"
        assert time.monotonic() < deadline, (
            f"{what} not ready within {START_TIMEOUT_SECONDS:.0f}s:\n"
            + log.read_text(errors="replace")
        )
        time.sleep(0.1)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def host_database() -> Iterator[str]:
    """A database of its own on the suite's PostgreSQL, dropped afterwards."""
    from tests.support.databases import own_database

    with own_database("host_e2e") as url:
        yield url


@pytest.fixture
def host_redis() -> Iterator[str]:
    """The suite's Redis, database REDIS_DATABASE, empty before and after."""
    base = os.environ.get("TEST_REDIS_URL")
    if not base:
        pytest.fail("TEST_REDIS_URL is not set: run the suite with scripts/test.sh (make test)")
    url = urlunsplit(urlsplit(base)._replace(path=f"/{REDIS_DATABASE}"))
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
        yield url
        client.flushdb()
    finally:
        client.close()


# --- checks ----------------------------------------------------------------------------------


def runs_of(database: str, thread_id: str) -> list[tuple[str, str, Decimal | None]]:
    with psycopg.connect(database) as connection:
        return connection.execute(
            "SELECT r.protocol, r.status, r.cost FROM conversations_run r"
            " JOIN conversations_thread t ON t.id = r.thread_id WHERE t.thread_id = %s",
            [thread_id],
        ).fetchall()


def priced_run(database: str, thread_id: str) -> tuple[str, str, Decimal | None]:
    """The thread's one run once it succeeded with a cost (a run's end writes it)."""
    deadline = time.monotonic() + PRICED_TIMEOUT_SECONDS
    while True:
        rows = runs_of(database, thread_id)
        if len(rows) == 1 and rows[0][1] == "succeeded" and rows[0][2] is not None:
            return rows[0]
        assert time.monotonic() < deadline, f"no priced, succeeded run for {thread_id}: {rows}"
        time.sleep(0.1)


def test_the_recipe_marks_every_block_the_host_is_built_from() -> None:
    blocks = recipe_blocks()
    assert "python manage.py seed_model_prices" in blocks["setup"]
    marker = "<!-- host: celery.py -->\n"
    text = (REPO_ROOT / "docs" / "adding-to-a-project.md").read_text()
    with pytest.raises(RecipeError, match=re.escape("missing ['celery.py']")):
        recipe_blocks(text.replace(marker, ""))
    with pytest.raises(RecipeError, match="not directly followed"):
        recipe_blocks(text.replace(marker, marker + "\n"))


# A wheel built and installed with its dependencies into a new venv (pip's own limit: 600 s).
@pytest.mark.timeout(600)
def test_a_startproject_site_becomes_a_copilotkit_backend_by_the_recipe(
    tmp_path: Path, host_database: str, host_redis: str, fake_upstream: FakeUpstream
) -> None:
    blocks = recipe_blocks()

    # The package, as the recipe's wheel block builds and installs it.
    wheel = build_wheel(tmp_path / "dist")
    [*_, install] = commands(blocks["wheel"])
    assert install[:2] == ["pip", "install"]
    assert Path(install[2]).name == wheel.name and Path(install[2]).parent.name == "dist"
    names = zipfile.ZipFile(wheel).namelist()
    # The apps' templates ship in the wheel (the admin pages answered 500 without them).
    assert "conversations/templates/admin/conversations/thread/inspect.html" in names
    # The standalone site's demo page is not the package's: it stays in the repository.
    assert not any(name.endswith("demo/chat.html") for name in names)
    bin_dir = fresh_venv(tmp_path, wheel)

    # The project, written from the recipe's blocks.
    project = tmp_path / "site"
    project.mkdir()
    run([str(bin_dir / "django-admin"), "startproject", PACKAGE, str(project)])
    write_host(project, blocks)
    with (project / PACKAGE / "celery.py").open("a") as celery_module:
        celery_module.write(HOST_TASK)

    tryout = host_env(bin_dir)  # no DATABASE_URL, no REDIS_URL, no model key
    env = host_env(
        bin_dir,
        DATABASE_URL=host_database,
        REDIS_URL=host_redis,
        OPENAI_API_KEY="test",
        OPENAI_BASE_URL=fake_upstream.base_url,
    )
    outputs = [
        run(resolved(command, env), cwd=project, env=env, timeout=300).stdout
        for command in commands(blocks["setup"])
    ]
    assert any("System check identified no issues" in output for output in outputs), outputs
    assert any("model prices:" in output for output in outputs), outputs
    assert (project / "staticfiles" / "admin" / "css" / "base.css").is_file()
    run(
        resolved(
            ["python", "manage.py", "createsuperuser", "--noinput", "--username", "admin"], env
        ),
        cwd=project,
        env={
            **env,
            "DJANGO_SUPERUSER_EMAIL": "admin@example.com",
            "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
        },
    )

    # What the recipe says besides: a try-out checks clean on SQLite with no Redis; runserver
    # refuses to start; with DEBUG off the static files come from STATIC_ROOT.
    checked = run(resolved(["python", "manage.py", "check"], tryout), cwd=project, env=tryout)
    assert "System check identified no issues" in checked.stdout
    refused = subprocess.run(
        resolved(
            ["python", "manage.py", "runserver", "--noreload", f"127.0.0.1:{free_port()}"], env
        ),
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "copilot_runtime.E007" in said, said
    served = run(resolved(["python", "-c", STATIC_WITH_DEBUG_OFF], env), cwd=project, env=env)
    assert served.stdout.split()[:2] == ["200", "text/css;"], served.stdout

    [worker_command] = commands(blocks["worker"])
    [web_command] = commands(blocks["web"])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    worker_log, web_log = tmp_path / "worker.log", tmp_path / "web.log"
    with (
        started(worker_command, cwd=project, env=env, log=worker_log) as worker,
        started([*web_command, "--port", str(port)], cwd=project, env=env, log=web_log) as web,
    ):
        wait_until(
            lambda: " ready." in worker_log.read_text(errors="replace"),
            process=worker,
            log=worker_log,
            what="the worker",
        )
        banner = worker_log.read_text(errors="replace")
        assert "concurrency: 50 (thread)" in banner, banner
        assert "Connected to copilot_runtime.broker:Transport://" in banner, banner
        wait_until(lambda: answers(f"{url}/healthz"), process=web, log=web_log, what="uvicorn")
        assert answers(f"{url}/readyz"), httpx.get(f"{url}/readyz").text

        # v1: the real GraphQL client.
        v1_thread = f"host-v1-{uuid.uuid4()}"
        data = generate_data(
            thread_id=v1_thread,
            messages=[text_input("u1", 'FAKE: {"text": "Hello from the host"}')],
        )
        v1 = run_js(JS_CLIENT_VERSIONS[0], generate_command(url, data))
        assert v1["errors"] == []
        assert v1["final"]["status"]["code"] == "Success"

        # v2: the real frontend core.
        v2_thread = f"host-v2-{uuid.uuid4()}"
        v2 = run_agui(
            {
                "runtimeUrl": f"{url}/api/copilotkit",
                "agentId": "default",
                "threadId": v2_thread,
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

        # A subscription on the websocket: the real graphql-ws client.
        ensure_js_clients_installed()
        ws_thread = f"host-ws-{uuid.uuid4()}"
        subscribed = WsClientRun(
            {
                "protocol": TRANSPORT,
                "url": f"ws://127.0.0.1:{port}/api/copilotkit",
                "operation": {
                    "query": COPILOT_STREAM,
                    "variables": {
                        "data": generate_data(
                            thread_id=ws_thread,
                            messages=[text_input("u1", 'FAKE: {"text": "And on a websocket"}')],
                        )
                    },
                },
                "timeoutMs": 45_000,
            }
        ).result(timeout=60)
        assert subscribed["acknowledged"] and subscribed["completed"], subscribed
        events = [result["data"]["copilotStream"] for result in subscribed["results"]]
        text = "".join(event["delta"] for event in events if event["type"] == "text_delta")
        assert text == "And on a websocket"
        assert events[-1]["status"]["code"] == "Success"

        # Each run executed on the worker, and priced from the seeded prices.
        for thread_id, protocol in (
            (v1_thread, "graphql"),
            (v2_thread, "agui"),
            (ws_thread, "graphql-ws"),
        ):
            found_protocol, _status, cost = priced_run(host_database, thread_id)
            assert found_protocol == protocol
            assert cost is not None and cost > 0
        log = worker_log.read_text(errors="replace")
        executed = [
            status
            for statuses in map(ast.literal_eval, TASK_SUCCEEDED.findall(log))
            for status in (statuses if isinstance(statuses, list) else [statuses])
        ]
        assert executed == ["succeeded"] * 3, log

        # The host's own task, on the same worker: delivered, decoded and acknowledged as
        # Celery does it without the runtime (docs/production.md, "The fast lane").
        noted = tmp_path / "noted.json"
        run(resolved(["python", "-c", SEND_HOST_TASK, str(noted)], env), cwd=project, env=env)
        wait_until(
            lambda: noted.is_file() and noted.read_text().endswith("}"),
            process=worker,
            log=worker_log,
            what="the host's task",
        )
        assert json.loads(noted.read_text()) == {
            "when": "2026-12-07T05:00:00+00:00",
            "type": "datetime",
        }
        wait_until(
            lambda: HOST_TASK_SUCCEEDED.search(worker_log.read_text(errors="replace")),
            process=worker,
            log=worker_log,
            what="the host task's success in the worker's log",
        )

        # The admin's static files, under uvicorn.
        css = httpx.get(f"{url}/static/admin/css/base.css", timeout=10)
        assert css.status_code == 200
        assert css.headers["content-type"].startswith("text/css")

        # The admin's session inspector, in Chromium.
        with psycopg.connect(host_database) as connection:
            [(thread_pk,)] = connection.execute(
                "SELECT id FROM conversations_thread WHERE thread_id = %s", [v1_thread]
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
