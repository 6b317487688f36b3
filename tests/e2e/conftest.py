"""Served-process fixtures for end-to-end tests: the real ASGI server in a subprocess.

``live_server_factory(env={...})`` starts ``uvicorn copilot_runtime.site.asgi:application --port
<free port>`` (as ``make run`` serves it) against pytest-django's *test* database (the test gets
``transactional_db``, so rows it writes are visible to the server and vice versa), with ``env``
added to the environment, waits until ``GET /healthz`` answers 200 (30 s, stderr in the error)
and returns a ``LiveServer``: ``.url`` (``http://127.0.0.1:PORT``), ``.process``,
``.stderr_text()``, ``.stdout_text()``, ``.stop()``. Servers are stopped at teardown (SIGTERM,
SIGKILL after 5 s), before the test database is flushed.

    def test_hello(live_server_factory, fake_upstream):
        server = live_server_factory(env={"OPENAI_BASE_URL": fake_upstream.base_url,
                                          "OPENAI_API_KEY": "test"})
        httpx.post(f"{server.url}/api/copilotkit", json={"query": "{hello}"})

``live_server`` is the same with the default environment. It replaces pytest-django's threaded
``live_server`` in this directory. ``server`` is the site on the session's fake upstream
(``tests/support/generate_e2e.py``'s ``server_env``), for the modules that need no more;
``sdk_server`` a CopilotKit remote endpoint (the copilotkit SDK) for it to call.

A module marked ``shared_server`` (``pytestmark``) gets one ``server`` for all its tests,
started by the first and stopped when the module ends (started again if a test stopped it):
about a second of CPU saved per test. Its own ``server`` fixtures can do the same with
``shared_live_server_factory(env=...)``, one server per environment. Its tests still get
``transactional_db``, the tables emptied after each. Only for modules whose tests leave
nothing in the server's memory that a later test could meet: each its own threads (no thread
id reused between tests), no setting changed, no process signalled, no log read.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest

if TYPE_CHECKING:
    # Type names only: conftest modules are loaded by pytest, not imported at run time.
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess as LiveServer
    from tests.conftest import ServedProcesses, ServedProcessFactory
    from tests.support.peer_servers import UvicornServer

    LiveServerFactory = Callable[..., LiveServer]

# The production server (uvicorn, as scripts/run.sh serves) from the interpreter's own
# virtualenv (.venv/bin/uvicorn under `make test`).
UVICORN = Path(sys.executable).parent / "uvicorn"
ASGI_APPLICATION = "copilot_runtime.site.asgi:application"
HEALTH_TIMEOUT_SECONDS = 30.0


def current_database_url() -> str:
    """DATABASE_URL for the database pytest-django's fixtures point the connection at now."""
    from django.db import connection

    settings_dict = connection.settings_dict
    user = quote(settings_dict.get("USER") or "", safe="")
    password = quote(settings_dict.get("PASSWORD") or "", safe="")
    # A unix-socket directory ("/tmp/...") must be percent-encoded to sit in the host slot.
    host = quote(settings_dict.get("HOST") or "127.0.0.1", safe="")
    port = settings_dict.get("PORT") or "5432"
    name = quote(settings_dict["NAME"], safe="")
    return f"postgres://{user}:{password}@{host}:{port}/{name}"


@pytest.fixture(autouse=True)
def _live_server_helper() -> Iterator[None]:
    """Switch off pytest-django's helper for *its* ``live_server`` (this directory has its own).

    pytest-django's autouse helper reaches into any fixture named ``live_server`` for its
    threaded server's settings override, which our subprocess server does not have.
    """
    yield


def start_uvicorn(start: ServedProcessFactory, port: int, env: Mapping[str, str]) -> LiveServer:
    """``copilot_runtime.site.asgi`` on uvicorn at ``port``, as production serves it."""
    command = [
        str(UVICORN),
        ASGI_APPLICATION,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--ws",
        "websockets",
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    return start(
        command, port=port, env=env, health_path="/healthz", timeout=HEALTH_TIMEOUT_SECONDS
    )


@pytest.fixture
def live_server_factory(
    transactional_db: None,
    served_process_factory: ServedProcessFactory,
    base_subprocess_env: dict[str, str],
    unused_tcp_port_factory: Callable[[], int],
) -> LiveServerFactory:
    def start(env: Mapping[str, str] | None = None) -> LiveServer:
        full_env = {**base_subprocess_env, "DATABASE_URL": current_database_url(), **(env or {})}
        return start_uvicorn(served_process_factory, unused_tcp_port_factory(), full_env)

    return start


@pytest.fixture(scope="module")
def _module_servers(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServedProcesses, dict[tuple[tuple[str, str], ...], LiveServer]]]:
    """The servers a ``shared_server`` module's tests share, by environment."""
    from tests.conftest import ServedProcesses

    processes = ServedProcesses(tmp_path_factory.mktemp("module-servers"))
    yield processes, {}
    processes.stop_all()


@pytest.fixture
def live_server(live_server_factory: LiveServerFactory) -> LiveServer:
    return live_server_factory()


@pytest.fixture
def shared_live_server_factory(
    transactional_db: None,
    _module_servers: tuple[ServedProcesses, dict[tuple[tuple[str, str], ...], LiveServer]],
) -> LiveServerFactory:
    """``live_server_factory`` for a ``shared_server`` module: one server per environment for
    the whole module (started again if a test stopped it)."""
    from tests.conftest import subprocess_env
    from tests.support.workers import free_port

    processes, servers = _module_servers

    def start(env: Mapping[str, str] | None = None) -> LiveServer:
        wanted = {**(env or {}), "DATABASE_URL": current_database_url()}
        # By what the test asks for: the rest of os.environ varies by test (PYTEST_CURRENT_TEST).
        key = tuple(sorted(wanted.items()))
        shared = servers.get(key)
        if shared is None or shared.process.poll() is not None:
            full_env = {**subprocess_env(), **wanted}
            shared = servers[key] = start_uvicorn(processes.start, free_port(), full_env)
        return shared

    return start


@pytest.fixture
def server(
    request: pytest.FixtureRequest, transactional_db: None, fake_upstream: FakeUpstream
) -> LiveServer:
    """The site served on the session's fake upstream (``server_env``), as most modules here
    drive it; a module whose server needs more defines a ``server`` of its own. One for the
    whole module when it is marked ``shared_server`` (the module's doc above)."""
    from tests.support.generate_e2e import server_env

    shared = request.node.get_closest_marker("shared_server") is not None
    factory = "shared_live_server_factory" if shared else "live_server_factory"
    start: LiveServerFactory = request.getfixturevalue(factory)
    return start(env=server_env(fake_upstream.base_url))


@pytest.fixture
def sdk_server() -> Iterator[UvicornServer]:
    """A CopilotKit remote endpoint (the copilotkit SDK's FastAPI app) on uvicorn, in a thread."""
    from tests.support.copilotkit_sdk_app import copilotkit_sdk_app
    from tests.support.peer_servers import UvicornServer

    with UvicornServer(copilotkit_sdk_app()) as server:
        yield server
