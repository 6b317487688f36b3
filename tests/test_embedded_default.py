"""`make run` on the embedded default: SQLite file, in-memory channel layer, no Redis.

Runs ``scripts/run.sh`` exactly as ``make run`` does (migrate, then daphne) except for the
virtualenv step (``SKIP_INSTALL=1``) and the SQLite file, which goes to a temporary directory.
It needs no test database: the server writes only its own SQLite file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from tests.conftest import ServedProcessFactory

RUN_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "run.sh"
# migrate on a fresh SQLite file plus daphne's start-up, on a slow 2-core CI machine.
START_TIMEOUT_SECONDS = 120.0
# Infrastructure variables the embedded default must not need.
INFRASTRUCTURE_VARIABLES = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")


def test_make_run_serves_the_embedded_default(
    tmp_path: Path,
    served_process_factory: ServedProcessFactory,
    base_subprocess_env: dict[str, str],
    unused_tcp_port: int,
) -> None:
    sqlite_file = tmp_path / "db.sqlite3"
    env = {
        key: value
        for key, value in base_subprocess_env.items()
        if key not in INFRASTRUCTURE_VARIABLES
    }
    env |= {
        "HOST": "127.0.0.1",
        "PORT": str(unused_tcp_port),
        "SKIP_INSTALL": "1",
        # Still the embedded default's shape, only the file moves out of the checkout.
        "DATABASE_URL": f"sqlite:///{sqlite_file}",
    }

    server = served_process_factory(
        ["bash", str(RUN_SCRIPT)],
        port=unused_tcp_port,
        env=env,
        health_path="/healthz",
        timeout=START_TIMEOUT_SECONDS,
    )

    assert sqlite_file.stat().st_size > 0, "migrate did not create the SQLite database"
    with httpx.Client(base_url=server.url, timeout=10) as client:
        hello = client.post("/api/copilotkit", json={"query": "{hello}"})
        assert hello.status_code == 200, hello.text
        assert hello.json() == {"data": {"hello": "Hello World"}}

        admin_login = client.get("/admin/login/")
        assert admin_login.status_code == 200
        assert "Django" in admin_login.text

        stylesheet = client.get("/static/admin/css/base.css")
        assert stylesheet.status_code == 200
        assert stylesheet.headers["content-type"].startswith("text/css")
        assert len(stylesheet.content) > 1000

        assert client.get("/healthz").status_code == 200
        readiness = client.get("/readyz")
        assert readiness.status_code == 200, readiness.text
