"""The Celery shape's extra subprocesses: a throwaway redis-server and one Celery worker.

Both are started like ``benchmarks.processes`` starts the others (own session, output in files,
stopped by process group id: SIGTERM, then SIGKILL). The worker runs with ``-l warning`` so its
per-task log lines cost nothing; at that level Celery does not log its ``ready.`` line (it is
an INFO message), so readiness is asked of the worker itself: a remote-control ``ping`` over
the broker, which only a worker whose consumer is running answers. The runner then also
requires one request to stream to ``Success`` through the worker.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from benchmarks import procstat
from benchmarks.processes import REPO_ROOT, VENV_BIN, Managed, ProcessFailed, start_process

REDIS_SERVER_CANDIDATES = ("/usr/bin/redis-server", "redis-server")
CELERY = VENV_BIN / "celery"
READY_LINE = " ready."
START_TIMEOUT_SECONDS = 60.0
PING_TIMEOUT_SECONDS = 1.0


def find_redis_server() -> str | None:
    for candidate in REDIS_SERVER_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    return None


def _redis_answers(port: int) -> bool:
    """A raw ``PING`` (no client library needed): ``+PONG`` back means it is serving."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def start_redis(*, port: int, log_dir: Path) -> Managed:
    """``redis-server`` on loopback, no persistence; waits until it answers PING."""
    executable = find_redis_server()
    if executable is None:
        raise ProcessFailed("the celery executor needs redis-server (apt-get install redis-server)")
    working_dir = log_dir / "redis"
    working_dir.mkdir(exist_ok=True)
    managed = start_process(
        "redis",
        [
            executable,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(working_dir),
        ],
        env=dict(os.environ),
        log_dir=log_dir,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if managed.process.poll() is not None:
            raise ProcessFailed(f"redis-server exited at start\n{managed.output_tail()}")
        if _redis_answers(port):
            return managed
        time.sleep(0.05)
    managed.stop()
    raise ProcessFailed(f"redis-server did not answer on port {port}\n{managed.output_tail()}")


def celery_app_name(cwd: Path = REPO_ROOT) -> str:
    """The standalone site's Celery app as ``-A`` names it in the checkout at ``cwd``: the
    site's config moved into ``copilot_runtime/site/``, and a paired run may start a checkout
    from before that."""
    if (cwd / "copilot_runtime" / "site" / "celery.py").exists():
        return "copilot_runtime.site"
    return "copilot_runtime"


def worker_command(
    *, concurrency: int, pool: str, hostname: str, cwd: Path = REPO_ROOT
) -> list[str]:
    return [
        str(CELERY),
        "-A",
        celery_app_name(cwd),
        "worker",
        "-l",
        "warning",
        "-P",
        pool,
        "-c",
        str(concurrency),
        "-n",
        hostname,
        # One worker needs neither; mingle alone costs a second at start.
        "--without-mingle",
        "--without-gossip",
    ]


def _ping_worker(*, broker_url: str, hostname: str) -> bool:
    """Whether the worker answers a remote-control ping (its consumer is running)."""
    from celery import Celery  # only the celery shape needs it

    app = Celery("benchmark-ping", broker=broker_url)
    try:
        replies = app.control.ping(destination=[hostname], timeout=PING_TIMEOUT_SECONDS)
    except Exception:  # broker not there yet, connection reset: not ready
        return False
    finally:
        app.close()
    return any(hostname in reply for reply in replies or [])


def start_celery_worker(
    *,
    env: Mapping[str, str],
    log_dir: Path,
    concurrency: int,
    pool: str = "prefork",
    name: str = "celery-worker",
    cwd: Path = REPO_ROOT,
) -> Managed:
    """``celery -A copilot_runtime.site worker`` with ``env``, the checkout at ``cwd``'s code;
    waits until it is ready."""
    hostname = f"bench-{os.getpid()}-{name}@{socket.gethostname()}"
    managed = start_process(
        name,
        worker_command(concurrency=concurrency, pool=pool, hostname=hostname, cwd=cwd),
        # The setting too: celery reads an explicit "-P prefork" as "the configured pool".
        env={**env, "CELERY_WORKER_POOL": pool},
        log_dir=log_dir,
        cwd=cwd,
    )
    broker_url = env.get("CELERY_BROKER_URL") or env["REDIS_URL"]
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if managed.process.poll() is not None:
            raise ProcessFailed(f"the celery worker exited at start\n{managed.output_tail()}")
        # "ready." shows only at -l info (a caller's own command); the ping works at any level.
        logged = READY_LINE in managed.stderr_path.read_text(errors="replace")
        if logged or _ping_worker(broker_url=broker_url, hostname=hostname):
            return managed
        time.sleep(0.1)
    managed.stop()
    raise ProcessFailed(f"the celery worker was not ready in time\n{managed.output_tail()}")


@dataclass(frozen=True)
class TreeMemory:
    """Memory of a process and its direct children (a prefork worker and its pool)."""

    peak_rss_kib_by_process: dict[int, int]
    rss_kib: int
    pss_kib: int | None

    @property
    def peak_rss_kib_sum(self) -> int:
        """An upper bound of the tree's peak: per-process peaks (at different moments, and
        counting pages the children share with the parent once per process)."""
        return sum(self.peak_rss_kib_by_process.values())


def _pss_kib(pid: int) -> int | None:
    """Proportional set size (shared pages divided among their users), if readable."""
    try:
        text = (procstat.PROC / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return None


def tree_memory(pid: int) -> TreeMemory:
    peaks: dict[int, int] = {}
    rss = 0
    pss: int | None = 0
    for member in [pid, *procstat.children_of(pid)]:
        try:
            memory = procstat.memory_kib(member)
        except OSError:
            continue  # exited while we looked
        peaks[member] = memory.get("VmHWM", 0)
        rss += memory.get("VmRSS", 0)
        member_pss = _pss_kib(member)
        pss = None if pss is None or member_pss is None else pss + member_pss
    return TreeMemory(peak_rss_kib_by_process=peaks, rss_kib=rss, pss_kib=pss)


def stop_worker(managed: Managed) -> None:
    """SIGTERM (warm shutdown), SIGKILL after the grace period; then SIGKILL whatever is left
    of its process group, so no pool child outlives it holding database connections."""
    managed.stop()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(managed.pid, signal.SIGKILL)
