"""A ``shared_server`` module's tests share one served site (tests/e2e/conftest.py), each with
the test database's tables emptied after it, and a stopped one is started again.

The tests run in file order (one module stays on one worker: ``--dist loadfile``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from conversations.models import Thread

if TYPE_CHECKING:
    from tests.conftest import ServedProcess

pytestmark = [pytest.mark.e2e, pytest.mark.shared_server]

seen: list[int] = []


def _answers(server: ServedProcess) -> bool:
    return httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200


def test_the_first_test_starts_the_server_and_writes_a_row(server: ServedProcess) -> None:
    seen.append(server.process.pid)
    Thread.objects.create(thread_id="shared-server-row")

    assert _answers(server)


def test_the_next_test_gets_the_same_process_and_empty_tables(server: ServedProcess) -> None:
    seen.append(server.process.pid)

    assert seen[0] == seen[1]
    assert not Thread.objects.filter(thread_id="shared-server-row").exists()
    assert _answers(server)
    server.stop()


def test_a_stopped_server_is_started_again(server: ServedProcess) -> None:
    assert server.process.pid not in seen
    assert _answers(server)
