"""What a process of the suite owns: an xdist worker by its number, the serial lane by
``TEST_WORKER_INDEX`` (scripts/test.sh's run_suite), a plain ``pytest`` worker 0's share."""

from __future__ import annotations

import os

import pytest

from tests.support import workers


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
