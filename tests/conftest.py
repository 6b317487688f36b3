"""Suite-wide pytest configuration and fixtures.

Run the suite with ``make test`` (or ``scripts/test.sh -k ...``): it starts a throwaway
PostgreSQL (exported as ``DATABASE_URL``) and Redis (exported as ``TEST_REDIS_URL``, never as
``REDIS_URL``) and stops them afterwards. The suite refuses to run on any other database engine,
because the product's guarantees (row locks, one run per thread, concurrent writers) are
PostgreSQL's.

Fixtures:

``user`` / ``other_user``
    two ordinary users (password: the ``user_password`` fixture), for ownership checks.
``fake_upstream``
    an in-process fake OpenAI-compatible upstream (``benchmarks.fake_upstream.FakeUpstream``),
    shared by the session and reset before each test; point the runtime at ``.base_url``.
``served_process_factory`` / ``base_subprocess_env``
    starts a server subprocess (stdout/stderr to temp files), waits for a health URL, and
    stops it (SIGTERM, then SIGKILL) at teardown; the environment to start it from.
    ``tests/e2e/conftest.py`` builds ``live_server_factory`` / ``live_server`` on them.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

REPO_ROOT = Path(__file__).resolve().parent.parent

# In-process tests keep their rows in the test's own transaction (pytest-django's ``db``), which
# the raw-SQL store's separate connections cannot see: they run the turn's storage through the
# ORM. Served processes (end-to-end tests) use the product's default, raw SQL on PostgreSQL, and
# tests/conversations/store/ checks that path against the ORM.
TURN_STORE_ENV = "COPILOT_RUNTIME_TURN_STORE"
os.environ[TURN_STORE_ENV] = "orm"
POSTGRESQL_ENGINE = "django.db.backends.postgresql"
TEST_USER_PASSWORD = "correct-horse-battery-staple"


# --- PostgreSQL only --------------------------------------------------------------------------


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse to run on SQLite (or anything else): tests must see PostgreSQL's behaviour."""
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"]
    if engine != POSTGRESQL_ENGINE:
        raise pytest.UsageError(
            f"the test suite runs on PostgreSQL only, but the database engine is {engine!r} "
            f"(DATABASE_URL is {'set' if os.environ.get('DATABASE_URL') else 'not set'}).\n"
            "Run it with `make test` (or `scripts/test.sh <pytest args>`), which starts a "
            "throwaway PostgreSQL and Redis, or point DATABASE_URL at a PostgreSQL you own "
            "(postgres://user:pass@host:port/db, with CREATEDB rights)."
        )


# --- parallel workers (pytest-xdist) -----------------------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    """A worker's own Redis server (tests/support/workers.py): TEST_REDIS_URL is this process's."""
    from tests.support.workers import claim_redis

    claim_redis()


def pytest_unconfigure(config: pytest.Config) -> None:
    from tests.support.workers import release_redis

    release_redis()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On pytest-xdist workers, the longest modules first: those holding a test with a time
    limit of its own (the longest first), then the served (e2e) ones, then the rest, each group
    in file order. Handed out a module at a time in that order (``--dist loadfile``), a
    three-minute test starts at once rather than last, and the quick in-process modules fill the
    workers' time at the end."""
    from tests.support.workers import worker_id

    if worker_id() == "master":
        return

    def rank(item: pytest.Item) -> tuple[float, int]:
        limit = item.get_closest_marker("timeout")
        own_limit = float(limit.args[0]) if limit is not None and limit.args else 0.0
        return (-own_limit, 0 if item.get_closest_marker("e2e") is not None else 1)

    module_rank: dict[str, tuple[float, int]] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        module_rank[module] = min(module_rank.get(module, (0.0, 1)), rank(item))
    # Stable: each module's tests stay together and in their order.
    items.sort(key=lambda item: module_rank[item.nodeid.split("::", 1)[0]])


@pytest.fixture
def unused_tcp_port() -> int:
    """pytest-asyncio's fixture, from this worker's own block of ports."""
    from tests.support.workers import free_port

    return free_port()


@pytest.fixture(scope="session")
def unused_tcp_port_factory() -> Callable[[], int]:
    """pytest-asyncio's fixture, from this worker's own block of ports (a new one each call)."""
    from tests.support.workers import free_port

    return free_port


# --- users ------------------------------------------------------------------------------------


@pytest.fixture
def user_password() -> str:
    return TEST_USER_PASSWORD


@pytest.fixture
def user(db: None, django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(
        username="alice", email="alice@example.com", password=TEST_USER_PASSWORD
    )


@pytest.fixture
def other_user(db: None, django_user_model: Any) -> Any:
    return django_user_model.objects.create_user(
        username="bob", email="bob@example.com", password=TEST_USER_PASSWORD
    )


# --- fake model upstream ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def _fake_upstream_server() -> Iterator[FakeUpstream]:
    from benchmarks.fake_upstream import FakeUpstream

    server = FakeUpstream()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def langgraph_server(
    _fake_upstream_server: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """A real local LangGraph server (``langgraph dev``, in memory) for the session, serving
    the forecast graph (tests/support/langgraph_platform) on the session's fake upstream."""
    from tests.support.langgraph_platform.server import LangGraphServer

    log_path = tmp_path_factory.mktemp("langgraph") / "langgraph-dev.log"
    with LangGraphServer(
        model_base_url=_fake_upstream_server.base_url, log_path=log_path
    ) as server:
        yield server


@pytest.fixture
def fake_upstream(_fake_upstream_server: FakeUpstream) -> FakeUpstream:
    """The session's fake upstream with no script, recorded requests or stats left over."""
    _fake_upstream_server.reset()
    return _fake_upstream_server


# --- server subprocesses ----------------------------------------------------------------------


class ServedProcessError(RuntimeError):
    """A server subprocess did not become healthy."""


@dataclass
class ServedProcess:
    """A server running as a subprocess; its output goes to files so no pipe can fill up."""

    url: str
    process: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path
    _stopped: bool = field(default=False, repr=False)

    def stdout_text(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self, grace_seconds: float = 5.0) -> None:
        """SIGTERM, then SIGKILL if it is still alive after ``grace_seconds``."""
        if self._stopped:
            return
        self._stopped = True
        # The process leads its own process group: signal the group, so a wrapper script's
        # children (e.g. `migrate` under scripts/run.sh) go too.
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                _signal_group(self.process, signal.SIGKILL)
                self.process.wait(timeout=grace_seconds)
        else:
            _signal_group(self.process, signal.SIGKILL)  # leftovers of an exited leader


def _signal_group(process: subprocess.Popen[bytes], signal_number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal_number)


ServedProcessFactory = Callable[..., ServedProcess]


def _answers_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _wait_until_healthy(served: ServedProcess, health_url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            raise ServedProcessError(
                f"{served.process.args!r} exited with code {served.process.returncode} before "
                f"{health_url} answered 200.\n--- stderr ---\n{served.stderr_text()}"
                f"\n--- stdout ---\n{served.stdout_text()}"
            )
        if _answers_ok(health_url):
            return
        time.sleep(0.1)
    served.stop()
    raise ServedProcessError(
        f"{health_url} did not answer 200 within {timeout:.0f}s for {served.process.args!r}."
        f"\n--- stderr ---\n{served.stderr_text()}\n--- stdout ---\n{served.stdout_text()}"
    )


class ServedProcesses:
    """Server subprocesses started from one log folder, all stopped by ``stop_all``."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[ServedProcess] = []

    def start(
        self,
        command: Sequence[str],
        *,
        port: int,
        env: Mapping[str, str],
        health_path: str = "/healthz",
        timeout: float = 30.0,
        host: str = "127.0.0.1",
    ) -> ServedProcess:
        index = len(self.started)
        stdout_path = self.log_dir / f"{index}.stdout.log"
        stderr_path = self.log_dir / f"{index}.stderr.log"
        with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
            process = subprocess.Popen(
                list(command),
                cwd=REPO_ROOT,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                start_new_session=True,
            )
        served = ServedProcess(
            url=f"http://{host}:{port}",
            process=process,
            stdout_path=stdout_path,
            stderr_path=stderr_path,
        )
        self.started.append(served)
        _wait_until_healthy(served, f"{served.url}{health_path}", timeout)
        return served

    def stop_all(self) -> None:
        for served in reversed(self.started):
            served.stop()


@pytest.fixture
def served_process_factory(tmp_path: Path) -> Iterator[ServedProcessFactory]:
    """Start server subprocesses and stop them all at teardown.

    ``served_process_factory(command, port=..., env=..., health_path="/healthz",
    timeout=30.0, host="127.0.0.1")`` runs ``command`` from the repository root with exactly
    ``env`` as its environment, waits until ``GET http://host:port<health_path>`` answers 200
    (raising ``ServedProcessError`` with the process's stderr otherwise) and returns a
    ``ServedProcess`` (``.url``, ``.process``, ``.stderr_text()``, ``.stdout_text()``).
    """
    processes = ServedProcesses(Path(tempfile.mkdtemp(prefix="served-", dir=tmp_path)))
    yield processes.start
    processes.stop_all()


def subprocess_env() -> dict[str, str]:
    """The environment a served subprocess starts from: ours, minus REDIS_URL, unbuffered.

    Each test decides whether its server uses Redis (``TEST_REDIS_URL`` holds the throwaway one).
    """
    # DEBUG off, as in production: a failure must never reach a client as Django's debug page.
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DEBUG": "false"}
    env.pop("REDIS_URL", None)
    env.pop(TURN_STORE_ENV, None)
    return env


@pytest.fixture
def base_subprocess_env() -> dict[str, str]:
    """``subprocess_env()``, for a test to add to."""
    return subprocess_env()


# --- connections opened by in-process runs ------------------------------------------------------


@pytest.fixture
async def _close_run_thread_connections() -> AsyncIterator[None]:
    """For async tests whose runs write through asgiref's thread-sensitive executor: its
    connection would otherwise outlive the test and keep the test database from being dropped
    (some test folders make this autouse with a conftest of their own)."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    yield
    await sync_to_async(connections.close_all)()


@pytest.fixture(scope="session", autouse=True)
def _anonymous_callers_allowed_by_default() -> Iterator[None]:
    """pytest-django runs with DEBUG off, where the product refuses anonymous callers unless
    ALLOW_ANONYMOUS says otherwise; most tests call as anonymous clients of a development
    setup and replace COPILOT_RUNTIME wholesale, so the suite defaults to allowing them.
    Tests of the product default restore it (tests/copilot_runtime/test_conf.py)."""
    from copilot_runtime.conf import DEFAULTS, runtime_settings

    product_default = DEFAULTS["ALLOW_ANONYMOUS"]
    DEFAULTS["ALLOW_ANONYMOUS"] = True
    runtime_settings.cache_clear()
    yield
    DEFAULTS["ALLOW_ANONYMOUS"] = product_default
    runtime_settings.cache_clear()


@pytest.fixture(scope="session", autouse=True)
def _close_async_executor_connections(django_db_setup: None) -> Iterator[None]:
    """Close the connection of asgiref's shared thread before the test database is dropped.

    Async tests (and runs executed in-process) reach the ORM through ``sync_to_async``, whose
    thread keeps its connection open; PostgreSQL refuses to drop a database still in use.
    """
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=10)


# --- per-process caches ---------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_runtime_caches() -> Iterator[None]:
    """Each test starts with empty short-lived caches (guardrail rules, model prices, callers,
    the known histories): rows a previous test rolled back must not be remembered. (A thread
    id known from an earlier test's thread made the next test's first look-up of that id ask
    twice, and a test that counts look-ups failed by test order.)"""
    from agents.remote.announced import announced_cache_clear
    from agents.remote.discovery import remote_info_cache_clear
    from copilot_runtime.endpoints.caller_cache import caller_cache_clear
    from copilot_runtime.guardrails.rules import rules_cache_clear
    from copilot_runtime.history import HISTORIES
    from copilot_runtime.tracing.cost import prices_cache_clear

    for clear in (
        rules_cache_clear,
        prices_cache_clear,
        caller_cache_clear,
        announced_cache_clear,
        remote_info_cache_clear,
        HISTORIES.clear,
    ):
        clear()
    yield


@pytest.fixture
def collector_restored() -> Iterator[None]:
    """A test that settles the garbage collector (as a server process does at startup) gives
    the test process its own settings back afterwards."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
