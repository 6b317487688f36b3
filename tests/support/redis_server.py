"""A redis-server of one test's own, on a fixed port so that it can be stopped, started and
restarted in place (the Celery outage tests and the fault suite)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import redis


def free_port() -> int:
    """A free loopback port of this pytest-xdist worker's own (tests/support/workers.py)."""
    from tests.support.workers import free_port as worker_free_port

    return worker_free_port()


@dataclass
class RedisServer:
    """A redis-server of one test's own, on a fixed port so it can be restarted in place."""

    port: int
    work_dir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = (self.work_dir / "redis.log").open("ab")
        with log:
            self.process = subprocess.Popen(
                [
                    "redis-server",
                    "--port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.work_dir),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + 10
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"redis-server on :{self.port} did not start:\n"
                    + (self.work_dir / "redis.log").read_text(errors="replace")
                )
            time.sleep(0.05)

    def answers(self) -> bool:
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def running_redis(directory: Path) -> Iterator[RedisServer]:
    """A redis-server of its own in ``directory``/redis, stopped on the way out."""
    work_dir = directory / "redis"
    work_dir.mkdir()
    server = RedisServer(port=free_port(), work_dir=work_dir)
    server.start()
    try:
        yield server
    finally:
        server.stop()
