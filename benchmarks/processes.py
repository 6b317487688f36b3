"""The benchmark's subprocesses: the fake upstream, ``migrate`` and the project's server.

Each runs in its own session with its output in files (no pipe can fill up) and is stopped by
its own process group id: SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
DAPHNE = VENV_BIN / "daphne"
UVICORN = VENV_BIN / "uvicorn"
UVICORN_SERVER = "uvicorn"
DAPHNE_SERVER = "daphne"
ASGI_APPLICATION = "copilot_runtime.site.asgi:application"
FAKE_PORT_PREFIX = "FAKE_UPSTREAM_PORT="


class ProcessFailed(RuntimeError):
    """A subprocess exited, or did not become ready, when it should have."""


@dataclass
class Managed:
    """A started subprocess and where its output goes."""

    name: str
    process: subprocess.Popen[bytes]
    stdout_path: Path
    stderr_path: Path
    _stopped: bool = field(default=False, repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def output_tail(self, characters: int = 4000) -> str:
        out = self.stdout_path.read_text(errors="replace")[-characters:]
        err = self.stderr_path.read_text(errors="replace")[-characters:]
        return f"--- {self.name} stderr ---\n{err}\n--- {self.name} stdout ---\n{out}"

    def stop(self, grace_seconds: float = 10.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                _signal_group(self.process, signal.SIGKILL)
                self.process.wait(timeout=grace_seconds)


def _signal_group(process: subprocess.Popen[bytes], signal_number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal_number)


def start_process(
    name: str,
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    log_dir: Path,
    cwd: Path = REPO_ROOT,
) -> Managed:
    """``command`` in its own session, from ``cwd`` (another checkout serves its own code:
    benchmarks/paired.py)."""
    stdout_path = log_dir / f"{name}.stdout.log"
    stderr_path = log_dir / f"{name}.stderr.log"
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    return Managed(name=name, process=process, stdout_path=stdout_path, stderr_path=stderr_path)


def new_log_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="copilot-bench-logs."))


def start_fake_upstream(*, env: Mapping[str, str], log_dir: Path) -> tuple[Managed, int]:
    """``python -m benchmarks.fake_upstream --port 0`` (no token delay); returns it and its port."""
    managed = start_process(
        "fake-upstream",
        [
            sys.executable,
            "-m",
            "benchmarks.fake_upstream",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--token-delay-ms",
            "0",
            # Recording request bodies is for tests; the benchmark has no use for them.
            "--max-recorded-requests",
            "0",
        ],
        env=env,
        log_dir=log_dir,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for line in managed.stdout_path.read_text(errors="replace").splitlines():
            if line.startswith(FAKE_PORT_PREFIX):
                return managed, int(line.removeprefix(FAKE_PORT_PREFIX))
        if managed.process.poll() is not None:
            break
        time.sleep(0.05)
    managed.stop()
    raise ProcessFailed(f"the fake upstream did not report its port\n{managed.output_tail()}")


def run_migrate(*, env: Mapping[str, str], log_dir: Path) -> None:
    managed = start_process(
        "migrate", [sys.executable, "manage.py", "migrate", "--noinput"], env=env, log_dir=log_dir
    )
    try:
        returncode = managed.process.wait(timeout=180)
    except subprocess.TimeoutExpired:
        managed.stop()
        raise ProcessFailed(f"migrate took over 180 s\n{managed.output_tail()}") from None
    if returncode != 0:
        raise ProcessFailed(f"migrate failed ({returncode})\n{managed.output_tail()}")


def _answers_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def default_server() -> str:
    """uvicorn (what ``scripts/run.sh`` serves with) when installed, else daphne."""
    return UVICORN_SERVER if UVICORN.exists() else DAPHNE_SERVER


def server_command(
    *, port: int, server: str | None = None, application: str = ASGI_APPLICATION
) -> list[str]:
    """The one place the project's server command is built (``--server`` overrides); a host
    project (benchmarks/host_project.py) is served with the same flags, its own
    ``application``."""
    if (server or default_server()) == DAPHNE_SERVER:
        return [str(DAPHNE), "-b", "127.0.0.1", "-p", str(port), application]
    return [
        str(UVICORN),
        application,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--loop",
        "uvloop",
        "--http",
        "httptools",
        "--no-access-log",
        "--log-level",
        "warning",
    ]


def wait_healthy(managed: Managed, health_url: str, *, timeout: float = 60) -> Managed:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if managed.process.poll() is not None:
            raise ProcessFailed(f"{managed.name} exited at start\n{managed.output_tail()}")
        if _answers_ok(health_url):
            return managed
        time.sleep(0.1)
    managed.stop()
    raise ProcessFailed(f"{managed.name} did not answer {health_url}\n{managed.output_tail()}")


def start_server(
    *,
    port: int,
    env: Mapping[str, str],
    log_dir: Path,
    server: str | None = None,
    name: str = "",
    cwd: Path = REPO_ROOT,
    application: str = ASGI_APPLICATION,
) -> Managed:
    """The project (the checkout at ``cwd``) served as ``scripts/run.sh`` serves it; waits
    for /healthz."""
    managed = start_process(
        name or (server or default_server()),
        server_command(port=port, server=server, application=application),
        env=env,
        log_dir=log_dir,
        cwd=cwd,
    )
    return wait_healthy(managed, f"http://127.0.0.1:{port}/healthz")


def start_daphne(*, port: int, env: Mapping[str, str], log_dir: Path) -> Managed:
    """daphne serving the ASGI application; waits for /healthz."""
    return start_server(port=port, env=env, log_dir=log_dir, server=DAPHNE_SERVER, name="daphne")
