"""The fault suite's services: a PostgreSQL cluster and a Redis of its own, so that restarting
or stopping them never disturbs the rest of the suite, and the runtime's processes on them.

Fixtures:

``fault_database``
    a migrated ``FaultDatabase`` (module scope): ``.url``, ``.halt()`` / ``.resume()`` (an
    operator's restart), ``.terminate_backends()`` (what a failover, a PgBouncer restart or an
    idle-connection reaper does), ``.rows(sql)`` (read through a connection of the test's own),
    and ``.token`` (a bearer API token of a user made for the suite).
``fault_redis``
    a ``RedisServer`` of the test's own (``tests/support/redis_server.py``).
``runtime_web`` / ``runtime_worker``
    ``runtime_web(executor="inline" | "celery", redis_url=...)`` serves the standalone site with
    uvicorn as production does (DEBUG off, the caller cache off so that every request reads
    the token from the database); ``runtime_worker(redis_url=...)`` starts a threads-pool
    Celery worker. Both are stopped at teardown.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from benchmarks.postgres import ThrowawayPostgres, find_pg_bin
from tests.conftest import REPO_ROOT, ServedProcess
from tests.support.generate_e2e import server_env
from tests.support.redis_server import RedisServer, free_port, running_redis

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcessFactory

pytestmark = pytest.mark.faults

PYTHON = sys.executable
UVICORN = Path(sys.executable).parent / "uvicorn"
CELERY = Path(sys.executable).parent / "celery"
FAULT_USER = "fault-operator"
HEARTBEAT_SECONDS = "0.5"
RUN_STALE_SECONDS = "3"
PENDING_TIMEOUT_SECONDS = "8"
WORKER_READY_SECONDS = 30.0


@dataclass
class FaultDatabase:
    server: ThrowawayPostgres
    token: str = ""

    @property
    def url(self) -> str:
        return self.server.database_url

    def halt(self) -> None:
        self.server.halt()

    def resume(self) -> None:
        self.server.resume()

    def terminate_backends(self) -> int:
        """End every other session on the runtime's database; how many there were."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        return len(rows)

    def rows(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(sql, params).fetchall()


def _manage(database_url: str, *arguments: str, **extra: str) -> str:
    environment = {**os.environ, "DATABASE_URL": database_url, "DEBUG": "false", **extra}
    environment.pop("REDIS_URL", None)
    environment.pop("COPILOT_RUNTIME_TURN_STORE", None)
    done = subprocess.run(
        [PYTHON, "manage.py", *arguments],
        cwd=REPO_ROOT,
        env={**environment, "DJANGO_SUPERUSER_PASSWORD": "fault-password-1234"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(arguments)} failed:\n{done.stderr}")
    return done.stdout


@pytest.fixture(scope="module")
def fault_database() -> Iterator[FaultDatabase]:
    pg_bin = find_pg_bin()
    if pg_bin is None:
        pytest.fail("no PostgreSQL binaries (initdb): run the suite with make test")
    server = ThrowawayPostgres(pg_bin)
    try:
        server.start()
        database = FaultDatabase(server=server)
        _manage(database.url, "migrate", "--noinput")
        _manage(
            database.url, "createsuperuser", "--noinput", "--username", FAULT_USER,
            "--email", "fault@example.com",
        )  # fmt: skip
        issued = _manage(database.url, "apitoken", "issue", "--user", FAULT_USER, "--name", "f")
        database.token = _token_in(issued)
        yield database
    finally:
        server.stop()


def _token_in(output: str) -> str:
    """The token ``apitoken issue`` prints, alone on its last line."""
    lines = output.strip().splitlines()
    if not lines or " " in lines[-1]:
        raise RuntimeError(f"no token in the output of apitoken issue:\n{output}")
    return lines[-1]


@pytest.fixture
def fault_redis(tmp_path: Path) -> Iterator[RedisServer]:
    with running_redis(tmp_path) as server:
        yield server


def _environment(
    database: FaultDatabase, fake_upstream: FakeUpstream, *, executor: str, redis_url: str
) -> dict[str, str]:
    environment = {**os.environ, "PYTHONUNBUFFERED": "1", "DEBUG": "false"}
    for name in ("REDIS_URL", "COPILOT_RUNTIME_TURN_STORE", "CELERY_BROKER_URL"):
        environment.pop(name, None)
    environment.update(server_env(fake_upstream.base_url))
    environment.update(
        {
            "DATABASE_URL": database.url,
            "DATABASE_CONNECT_TIMEOUT": "2",
            "COPILOT_RUNTIME_EXECUTOR": executor,
            "COPILOT_RUNTIME_ALLOW_ANONYMOUS": "false",
            # Every request reads its caller's token: the connection that read it is the one
            # a restart breaks.
            "COPILOT_RUNTIME_AUTH_CACHE_SECONDS": "0",
            "COPILOT_RUNTIME_HEARTBEAT_SECONDS": HEARTBEAT_SECONDS,
            "COPILOT_RUNTIME_RUN_STALE_SECONDS": RUN_STALE_SECONDS,
            "COPILOT_RUNTIME_PENDING_TIMEOUT_SECONDS": PENDING_TIMEOUT_SECONDS,
        }
    )
    if redis_url:
        environment["REDIS_URL"] = redis_url
    return environment


RuntimeWeb = Callable[..., ServedProcess]


@pytest.fixture
def runtime_web(
    fault_database: FaultDatabase,
    fake_upstream: FakeUpstream,
    served_process_factory: ServedProcessFactory,
) -> RuntimeWeb:
    def start(*, executor: str = "inline", redis_url: str = "") -> ServedProcess:
        port = free_port()
        command = [
            str(UVICORN), "copilot_runtime.site.asgi:application", "--host", "127.0.0.1",
            "--port", str(port), "--loop", "uvloop", "--http", "httptools",
            "--no-access-log", "--log-level", "warning",
        ]  # fmt: skip
        environment = _environment(
            fault_database, fake_upstream, executor=executor, redis_url=redis_url
        )
        return served_process_factory(command, port=port, env=environment, timeout=30)

    return start


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def runtime_worker(
    fault_database: FaultDatabase, fake_upstream: FakeUpstream, tmp_path: Path
) -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(*, redis_url: str) -> Worker:
        log_path = tmp_path / f"worker-{len(started)}.log"
        environment = _environment(
            fault_database, fake_upstream, executor="celery", redis_url=redis_url
        )
        command = [
            str(CELERY), "-A", "copilot_runtime.site", "worker", "-l", "info", "-P", "threads",
            "-c", "8", "-n", f"fault-{len(started)}-{os.getpid()}@%h", "--without-mingle",
            "--without-gossip",
        ]  # fmt: skip
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command,
                cwd=REPO_ROOT,
                env={**environment, "CELERY_WORKER_POOL": "threads"},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = Worker(process=process, log_path=log_path)
        started.append(worker)
        deadline = time.monotonic() + WORKER_READY_SECONDS
        while " ready." not in worker.log_text():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start:\n{worker.log_text()}")
            time.sleep(0.05)
        return worker

    yield start

    for worker in started:
        if worker.process.poll() is None:
            worker.process.terminate()
            try:
                worker.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait(timeout=5)
