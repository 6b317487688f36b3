"""The embedded default's SQLite file on a disk that fills up, for real (a small tmpfs).

While no page can be written, a run is refused saying the disk is full (not that the database
is down) and ``/readyz`` fails; once space is freed, both serve again, and what was stored
before is still there.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.faults.conftest import PYTHON, UVICORN
from tests.faults.traffic import v2_run
from tests.support.generate_e2e import server_env
from tests.support.redis_server import free_port

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream
    from tests.conftest import ServedProcessFactory

pytestmark = [pytest.mark.faults, pytest.mark.serial]

DISK_SIZE = "12M"
CHUNK = b"\0" * 65536


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A filesystem of a few megabytes of its own (root mounts a tmpfs, as CI runs)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_SIZE}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.fail(f"cannot mount a small tmpfs (the suite runs as root): {mounted.stderr}")
    try:
        yield mount_point
    finally:
        # Lazily: the served process may still hold the file until its teardown.
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as out:
        while True:
            out.write(CHUNK)
            out.flush()
            os.fsync(out.fileno())
    return filler


def test_a_full_disk_is_named_as_such_and_the_service_returns_once_space_is_freed(
    small_disk: Path,
    fake_upstream: FakeUpstream,
    served_process_factory: ServedProcessFactory,
    base_subprocess_env: dict[str, str],
) -> None:
    database_url = f"sqlite:///{small_disk / 'db.sqlite3'}"
    env = {
        **{k: v for k, v in base_subprocess_env.items() if k != "DATABASE_URL"},
        **server_env(fake_upstream.base_url),
        "DATABASE_URL": database_url,
        "COPILOT_RUNTIME_ALLOW_ANONYMOUS": "true",
    }
    subprocess.run(
        [PYTHON, "manage.py", "migrate", "--noinput"],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    web = served_process_factory(
        [str(UVICORN), "copilot_runtime.site.asgi:application", "--host", "127.0.0.1",
         "--port", str(port), "--log-level", "warning"],
        port=port,
        env=env,
    )  # fmt: skip
    token = ""  # anonymous callers, as the embedded default serves a small team
    assert v2_run(web.url, token, "disk-before", "Before.").succeeded
    assert httpx.get(f"{web.url}/readyz", timeout=10).status_code == 200

    filler = _fill(small_disk)
    refused = v2_run(web.url, token, "disk-full", "Anyone?")
    assert refused.status == 503, (refused.status, refused.body)
    assert "disk is full" in refused.body, refused.body
    ready = httpx.get(f"{web.url}/readyz", timeout=10)
    assert ready.status_code == 503
    assert ready.json()["problems"] == ["database disk full"]

    filler.unlink()
    assert httpx.get(f"{web.url}/readyz", timeout=10).status_code == 200
    again = v2_run(web.url, token, "disk-before", "After.")
    assert again.succeeded, (again.status, again.body, again.types)
    with contextlib.closing(sqlite3.connect(small_disk / "db.sqlite3")) as db:
        (stored,) = db.execute(
            "SELECT count(*) FROM conversations_message m JOIN conversations_thread t"
            " ON t.id = m.thread_id WHERE t.thread_id = 'disk-before'"
        ).fetchone()
    assert stored == 4  # both turns, each a question and its answer
