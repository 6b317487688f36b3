"""What a process of the suite owns: an xdist worker by its number, the serial lane by
``TEST_WORKER_INDEX`` (scripts/test.sh's run_suite), a plain ``pytest`` worker 0's share; and
the serial lane finds every test marked ``serial``."""

from __future__ import annotations

import os
import re

import pytest

from tests.conftest import REPO_ROOT
from tests.support import workers

SERIAL_MARK = re.compile(r"\bpytest\.mark\.serial\b")


@pytest.fixture
def outside_xdist(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv("TEST_WORKER_INDEX", raising=False)
    return monkeypatch


def test_the_serial_lane_owns_the_block_of_ports_after_the_workers(
    outside_xdist: pytest.MonkeyPatch,
) -> None:
    outside_xdist.setenv("TEST_WORKER_INDEX", "6")
    first = workers.PORTS_FROM + 6 * workers.PORTS_PER_WORKER

    assert workers.worker_id() == "master"
    assert workers.worker_index() == 6
    assert first <= workers.free_port() < first + workers.PORTS_PER_WORKER


def test_the_serial_lane_takes_the_redis_server_listed_at_its_index(
    outside_xdist: pytest.MonkeyPatch,
) -> None:
    listed = [f"redis://127.0.0.1:{port}/0" for port in range(7001, 7008)]
    outside_xdist.setenv("TEST_REDIS_URLS", " ".join(listed))
    outside_xdist.setenv("TEST_REDIS_URL", listed[0])
    outside_xdist.setenv("TEST_WORKER_INDEX", "6")

    workers.claim_redis()

    assert os.environ["TEST_REDIS_URL"] == listed[6]


def test_a_plain_pytest_keeps_the_redis_it_was_given(outside_xdist: pytest.MonkeyPatch) -> None:
    outside_xdist.setenv("TEST_REDIS_URLS", "redis://127.0.0.1:7001/0 redis://127.0.0.1:7002/0")
    outside_xdist.setenv("TEST_REDIS_URL", "redis://127.0.0.1:7009/0")

    workers.claim_redis()

    assert workers.worker_index() == 0
    assert os.environ["TEST_REDIS_URL"] == "redis://127.0.0.1:7009/0"


def test_an_xdist_worker_is_known_by_its_number(outside_xdist: pytest.MonkeyPatch) -> None:
    outside_xdist.setenv("PYTEST_XDIST_WORKER", "gw3")
    outside_xdist.setenv("TEST_WORKER_INDEX", "6")

    assert workers.worker_index() == 3


def test_every_test_marked_serial_lives_where_the_serial_lane_collects() -> None:
    script = (REPO_ROOT / "scripts" / "test.sh").read_text()
    [listed] = re.findall(r"^SERIAL_PATHS=\(([^)]*)\)$", script, re.MULTILINE)
    lane_paths = listed.split()
    assert lane_paths and all((REPO_ROOT / path).exists() for path in lane_paths), lane_paths

    marked = sorted(
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "tests").rglob("test_*.py")
        if SERIAL_MARK.search(path.read_text())
    )

    assert marked, "no test is marked serial: the lane would collect nothing"
    outside = [path for path in marked if not any(path.startswith(p) for p in lane_paths)]
    assert outside == [], f"marked serial outside SERIAL_PATHS in scripts/test.sh: {outside}"
