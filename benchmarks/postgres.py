"""A throwaway PostgreSQL for the benchmark, set up like ``scripts/test.sh`` sets up the suite's.

initdb into a temporary directory, loopback only on a free port, SCRAM password auth over
TCP (as a real deployment connects), durability off (``fsync``, ``synchronous_commit``,
``full_page_writes``: the data is thrown away), a ``copilot`` role owning a ``copilot``
database. As root, PostgreSQL's tools run as the ``postgres`` system user (``runuser``), since
PostgreSQL refuses to run as root. ``stop()`` shuts it down and deletes the directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

ROLE = "copilot"
PASSWORD = "copilot"
DATABASE = "copilot"
START_TIMEOUT_SECONDS = 30


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries here, or the cluster would not start."""


def find_pg_bin() -> Path | None:
    """``$PG_BIN``, else the newest ``/usr/lib/postgresql/*/bin``, else initdb on PATH."""
    configured = os.environ.get("PG_BIN")
    if configured:
        return Path(configured) if (Path(configured) / "initdb").exists() else None
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda path: [
            int(part) if part.isdigit() else 0 for part in path.parent.name.split(".")
        ],
    )
    for candidate in reversed(candidates):
        if (candidate / "initdb").exists():
            return candidate
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ThrowawayPostgres:
    def __init__(self, pg_bin: Path) -> None:
        self.pg_bin = pg_bin
        self.as_root = os.geteuid() == 0
        self.directory: Path | None = None
        self.port = 0
        self.started = False

    @property
    def data_dir(self) -> Path:
        assert self.directory is not None
        return self.directory / "data"

    @property
    def database_url(self) -> str:
        return f"postgres://{ROLE}:{PASSWORD}@127.0.0.1:{self.port}/{DATABASE}"

    def postmaster_pid(self) -> int | None:
        try:
            first_line = (self.data_dir / "postmaster.pid").read_text().splitlines()[0]
        except (OSError, IndexError):
            return None
        return int(first_line) if first_line.strip().isdigit() else None

    def _run(self, *command: str | Path, capture: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a PostgreSQL tool, as ``postgres`` when we are root."""
        argv = [str(part) for part in command]
        if self.as_root:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        return subprocess.run(
            argv,
            cwd=self.directory,
            capture_output=capture,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )

    def start(self) -> str:
        """Start the cluster; returns its DATABASE_URL."""
        self.directory = Path(tempfile.mkdtemp(prefix="copilot-bench-pg."))
        self.directory.chmod(0o755)
        if self.as_root:
            shutil.chown(self.directory, user="postgres", group="postgres")
        initdb = self._run(
            self.pg_bin / "initdb",
            "-D",
            self.data_dir,
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-locale",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
        )
        if initdb.returncode != 0:
            raise PostgresUnavailable(f"initdb failed:\n{initdb.stdout}\n{initdb.stderr}")

        self.port = free_port()
        settings = (
            "\n# --- benchmarks/postgres.py ---\n"
            "listen_addresses = '127.0.0.1'\n"
            f"port = {self.port}\n"
            f"unix_socket_directories = '{self.directory}'\n"
            "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
            "max_connections = 200\n"
        )
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(settings)

        log_file = self.directory / "postgres.log"
        started = self._run(
            self.pg_bin / "pg_ctl",
            "-D",
            self.data_dir,
            "-l",
            log_file,
            "-w",
            "-t",
            str(START_TIMEOUT_SECONDS),
            "start",
        )
        if started.returncode != 0:
            log = log_file.read_text(errors="replace") if log_file.exists() else ""
            raise PostgresUnavailable(f"PostgreSQL did not start:\n{started.stderr}\n{log}")
        self.started = True
        self._wait_ready()
        created = self._run(
            self.pg_bin / "psql",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            self.directory,
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-c",
            f"CREATE ROLE {ROLE} LOGIN CREATEDB PASSWORD '{PASSWORD}'",
            "-c",
            f"CREATE DATABASE {DATABASE} OWNER {ROLE}",
        )
        if created.returncode != 0:
            raise PostgresUnavailable(f"could not create the role/database:\n{created.stderr}")
        return self.database_url

    def halt(self) -> None:
        """Shut the server down as an operator's restart does (``-m fast``: sessions are
        ended, their clients told), keeping its data for ``resume``."""
        stopped = self._run(self.pg_bin / "pg_ctl", "-D", self.data_dir, "-m", "fast", "-w", "stop")
        if stopped.returncode != 0:
            raise PostgresUnavailable(f"PostgreSQL did not stop:\n{stopped.stderr}")

    def resume(self) -> None:
        """Start the server ``halt`` stopped, on the same port and data."""
        assert self.directory is not None
        started = self._run(
            self.pg_bin / "pg_ctl",
            "-D",
            self.data_dir,
            "-l",
            self.directory / "postgres.log",
            "-w",
            "-t",
            str(START_TIMEOUT_SECONDS),
            "start",
        )
        if started.returncode != 0:
            raise PostgresUnavailable(f"PostgreSQL did not start again:\n{started.stderr}")
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            ready = subprocess.run(
                [self.pg_bin / "pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port)],
                check=False,
            )
            if ready.returncode == 0:
                return
            time.sleep(0.2)
        raise PostgresUnavailable(f"PostgreSQL not accepting connections on port {self.port}")

    def stop(self) -> None:
        if self.started:
            self.started = False
            pid = self.postmaster_pid()
            self._run(self.pg_bin / "pg_ctl", "-D", self.data_dir, "-m", "immediate", "stop")
            if pid is not None and self.postmaster_pid() == pid:
                # pg_ctl could not stop it (its pid file is still there): the postmaster we
                # started, by its id.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> ThrowawayPostgres:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
