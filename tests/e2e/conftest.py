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
    from tests.conftest import ServedProcessFactory
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


@pytest.fixture
def live_server_factory(
    transactional_db: None,
    served_process_factory: ServedProcessFactory,
    base_subprocess_env: dict[str, str],
    unused_tcp_port_factory: Callable[[], int],
) -> LiveServerFactory:
    def start(env: Mapping[str, str] | None = None) -> LiveServer:
        port = unused_tcp_port_factory()
        full_env = {**base_subprocess_env, "DATABASE_URL": current_database_url(), **(env or {})}
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
        return served_process_factory(
            command,
            port=port,
            env=full_env,
            health_path="/healthz",
            timeout=HEALTH_TIMEOUT_SECONDS,
        )

    return start


@pytest.fixture
def live_server(live_server_factory: LiveServerFactory) -> LiveServer:
    return live_server_factory()


@pytest.fixture
def server(live_server_factory: LiveServerFactory, fake_upstream: FakeUpstream) -> LiveServer:
    """The site served on the session's fake upstream (``server_env``), as most modules here
    drive it; a module whose server needs more defines a ``server`` of its own."""
    from tests.support.generate_e2e import server_env

    return live_server_factory(env=server_env(fake_upstream.base_url))


@pytest.fixture
def sdk_server() -> Iterator[UvicornServer]:
    """A CopilotKit remote endpoint (the copilotkit SDK's FastAPI app) on uvicorn, in a thread."""
    from tests.support.copilotkit_sdk_app import copilotkit_sdk_app
    from tests.support.peer_servers import UvicornServer

    with UvicornServer(copilotkit_sdk_app()) as server:
        yield server
