"""Dependencies point one way (docs/architecture.md): the layer order and the absence of cycles
are import-linter contracts in pyproject.toml, checked here over the real import graph."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from copilot_runtime.engine.agent_host import ChatOnlyHost
from copilot_runtime.errors import AgentNotFoundError

ROOT = Path(__file__).resolve().parents[1]


def contracts_kept(*added: tuple[str, str]) -> dict[str, bool]:
    """Each contract of pyproject.toml checked over the real import graph with ``added``
    imports put in, in an interpreter of its own (import-linter's settings are process-wide)."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.import_contracts", json.dumps(added)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_contracts_hold_as_lint_imports_reads_them() -> None:
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        # Storage reaching the run machinery (the admin's stop goes through a signal instead).
        ("conversations.admin.operations", "copilot_runtime.runs.executor"),
        # The turn importing an agent (it reaches them through the agent host).
        ("copilot_runtime.engine.chat", "agents.turns"),
        # The events importing storage.
        ("copilot_runtime.events.request", "conversations.models"),
        # The fast lane importing what is built on it.
        ("copilot_runtime.fastlane.celery", "copilot_runtime.runs.worker_loop"),
        # One protocol surface importing the other.
        ("copilot_runtime.agui.runs", "copilot_runtime.graphql.schema"),
    ],
)
def test_an_import_against_the_layer_order_breaks_the_contract(
    importer: str, imported: str
) -> None:
    assert contracts_kept() == {"layers": True, "acyclic": True}
    assert contracts_kept((importer, imported))["layers"] is False


def test_a_cycle_between_the_modules_of_a_package_breaks_the_contract() -> None:
    # runs/executor.py imports runs/relay.py; the other way round closes a cycle.
    added = ("copilot_runtime.runs.relay", "copilot_runtime.runs.executor")
    assert contracts_kept(added) == {"layers": True, "acyclic": False}


async def test_without_the_agents_app_the_engine_runs_the_chat_engine_alone() -> None:
    host = ChatOnlyHost()
    await host.resolve("default")
    with pytest.raises(AgentNotFoundError):
        await host.resolve("researcher")
    with pytest.raises(AgentNotFoundError):
        host.check_runnable("researcher")
