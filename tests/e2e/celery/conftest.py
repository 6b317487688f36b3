"""Real-component fixtures for the Celery executor: Redis, worker subprocesses, daphne on both.

Everything here is the production shape: a real ``celery worker`` (prefork pool, two children)
and real daphne processes, both against pytest-django's test database and a real Redis (broker
and channel layer), with the fake OpenAI upstream on loopback.

Fixtures:

``redis_url``
    ``TEST_REDIS_URL`` with a database number of its own per test module (1-15), flushed before
    each test, so a message left in a queue by one module never reaches another's worker.
``dedicated_redis``
    a ``RedisServer`` of the test's own (``.url``, ``.restart()``), for tests that stop Redis.
``celery_env``
    ``celery_env(redis_url, **extra)``: the environment a web process and a worker share
    (fake upstream, celery executor, broker, short heartbeats), ``extra`` added last;
    ``**STOCK_TRANSPORT_ENV`` among them: kombu's own Redis transport, not the runtime's.
``celery_worker_factory``
    ``celery_worker_factory(env=..., name="w1", concurrency=2)`` starts ``celery -A
    copilot_runtime worker`` against the test database and waits for ``ready.``; returns a
    ``CeleryWorker`` (``.log_text()``, ``.executed_runs()``, ``.kill()``, ``.stop()``).
    Workers are stopped at teardown (SIGTERM, then SIGKILL), before the database is flushed.
``celery_stack``
    ``celery_stack(redis_url, **extra)``: one daphne and one worker with the same environment;
    returns ``(server, worker)``.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from tests.conftest import REPO_ROOT
from tests.e2e.conftest import current_database_url
from tests.support.generate_e2e import server_env
from tests.support.redis_server import RedisServer, running_redis

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcess

CELERY = Path(sys.executable).parent / "celery"
WORKER_READY_TIMEOUT_SECONDS = 30.0
# Short enough that a lost worker is noticed within seconds, long enough for a busy CI box.
HEARTBEAT_SECONDS = "0.5"
RUN_STALE_SECONDS = 3.0
REDIS_DATABASES = 15  # 1..15; database 0 is left to the rest of the suite

_module_database_numbers = itertools.count()


# --- Redis --------------------------------------------------------------------------------------


def _with_database(url: str, number: int) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{number}", "", ""))


@pytest.fixture(scope="module")
def _module_redis_database() -> int:
    return next(_module_database_numbers) % REDIS_DATABASES + 1


@pytest.fixture
def redis_url(_module_redis_database: int) -> str:
    base = os.environ.get("TEST_REDIS_URL")
    if not base:
        pytest.fail("TEST_REDIS_URL is not set: run the suite with scripts/test.sh (make test)")
    url = _with_database(base, _module_redis_database)
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()
    return url


@pytest.fixture
def dedicated_redis(tmp_path: Path) -> Iterator[RedisServer]:
    with running_redis(tmp_path) as server:
        yield server


# --- environment ----------------------------------------------------------------------------------


CeleryEnv = Callable[..., dict[str, str]]

# ``celery_env(url, **STOCK_TRANSPORT_ENV)``: the served processes take kombu's own Redis
# transport, not the runtime's subclass that the site's settings name for a redis:// broker.
STOCK_TRANSPORT_ENV = {"DJANGO_SETTINGS_MODULE": "tests.e2e.celery.stock_transport_settings"}


@pytest.fixture
def celery_env(fake_upstream: FakeUpstream) -> CeleryEnv:
    def build(redis_url: str, **extra: str) -> dict[str, str]:
        return {
            **server_env(fake_upstream.base_url),
            "REDIS_URL": redis_url,
            "COPILOT_RUNTIME_EXECUTOR": "celery",
            "COPILOT_RUNTIME_HEARTBEAT_SECONDS": HEARTBEAT_SECONDS,
            "COPILOT_RUNTIME_RUN_STALE_SECONDS": str(RUN_STALE_SECONDS),
            **extra,
        }

    return build


# --- workers ------------------------------------------------------------------------------------

# Celery's own log lines (``-l info``) for the run tasks: one run's (its final status) or
# several runs' (a list of them).
_TASK_RECEIVED = re.compile(r"Task copilot\.execute_runs?\[[0-9a-f-]+\] received")
_TASK_SUCCEEDED = re.compile(
    r"Task copilot\.execute_runs?\[[0-9a-f-]+\] succeeded in [^:]+: ('\w*'|\[[^\]\n]*\])"
)


@dataclass
class CeleryWorker:
    """A ``celery worker`` subprocess; it leads its own process group (its pool children too)."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _stopped: bool = field(default=False, repr=False)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def executed_runs(self) -> list[str]:
        """The final status of each run this worker's tasks finished, in the order they ended."""
        statuses: list[str] = []
        for match in _TASK_SUCCEEDED.finditer(self.log_text()):
            value = ast.literal_eval(match.group(1))
            statuses.extend(value if isinstance(value, list) else [value])
        return statuses

    def tasks_received(self) -> int:
        return len(_TASK_RECEIVED.findall(self.log_text()))

    def _signal(self, signal_number: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal_number)

    def kill(self) -> None:
        """SIGKILL the worker and its pool children at once: a machine lost mid-turn."""
        self._signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self._stopped = True

    def stop(self, grace_seconds: float = 10.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(timeout=grace_seconds)
        # Pool children outliving their parent would keep database connections open.
        self._signal(signal.SIGKILL)


CeleryWorkerFactory = Callable[..., CeleryWorker]


def _wait_until_ready(worker: CeleryWorker) -> None:
    deadline = time.monotonic() + WORKER_READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if worker.process.poll() is not None:
            raise RuntimeError(
                f"celery worker {worker.name} exited with {worker.process.returncode}:\n"
                + worker.log_text()
            )
        if " ready." in worker.log_text():
            return
        time.sleep(0.05)
    worker.stop()
    raise RuntimeError(
        f"celery worker {worker.name} was not ready within {WORKER_READY_TIMEOUT_SECONDS:.0f}s:\n"
        + worker.log_text()
    )


@pytest.fixture
def celery_worker_factory(
    transactional_db: None, base_subprocess_env: dict[str, str], tmp_path: Path
) -> Iterator[CeleryWorkerFactory]:
    started: list[CeleryWorker] = []

    def start(
        *, env: Mapping[str, str], name: str = "w1", concurrency: int = 2, pool: str = "prefork"
    ) -> CeleryWorker:
        log_path = tmp_path / f"worker-{name}.log"
        # The setting too: celery reads an explicit "-P prefork" as "the configured pool".
        full_env = {
            **base_subprocess_env,
            "DATABASE_URL": current_database_url(),
            "CELERY_WORKER_POOL": pool,
            **env,
        }
        command = [
            str(CELERY),
            "-A",
            "copilot_runtime.site",
            "worker",
            "-l",
            "info",
            "-P",
            pool,
            "-c",
            str(concurrency),
            "-n",
            f"{name}-{os.getpid()}@%h",
            # Neither is needed by one test's workers; mingle alone costs a second at start.
            "--without-mingle",
            "--without-gossip",
        ]
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command,
                cwd=REPO_ROOT,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = CeleryWorker(name=name, process=process, log_path=log_path)
        started.append(worker)
        _wait_until_ready(worker)
        # The banner names the pool module: the one asked for, not the configured default.
        banner_pool = {"threads": "thread"}.get(pool, pool)
        assert f"concurrency: {concurrency} ({banner_pool})" in worker.log_text()
        return worker

    yield start

    for worker in reversed(started):
        worker.stop()


CeleryStack = Callable[..., "tuple[ServedProcess, CeleryWorker]"]


@pytest.fixture
def celery_stack(
    live_server_factory: Callable[..., ServedProcess],
    celery_worker_factory: CeleryWorkerFactory,
    celery_env: CeleryEnv,
) -> CeleryStack:
    def start(redis_url: str, **extra: str) -> tuple[ServedProcess, CeleryWorker]:
        env = celery_env(redis_url, **extra)
        worker = celery_worker_factory(env=env)
        server = live_server_factory(env=env)
        return server, worker

    return start
