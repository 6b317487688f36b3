"""Dependencies point one way (../shared/ARCHITECTURE.md): each rule here is an import that
must not appear, read from the source of every module of the layer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from copilot_runtime.engine.agent_host import ChatOnlyHost
from copilot_runtime.errors import AgentNotFoundError

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(folder: str) -> dict[str, set[str]]:
    """Module path -> the modules it imports (at any depth, lazy imports included)."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / folder).rglob("*.py"):
        if "migrations" in path.parts:
            continue
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[str(path.relative_to(ROOT))] = names
    return found


def offenders(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{module} imports {name}"
        for module, names in imported_modules(folder).items()
        for name in names
        if name.startswith(forbidden)
    )


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        # The engine reaches agents through the agent host, never by importing them.
        ("copilot_runtime/engine", ("agents",)),
        # The events (and the turn request) sit below everything.
        (
            "copilot_runtime/events",
            (
                "agents",
                "conversations",
                "copilot_runtime.engine",
                "copilot_runtime.graphql",
                "copilot_runtime.agui",
                "copilot_runtime.adapters",
            ),
        ),
        # Storage reads and writes; protocols shape what it returns.
        ("conversations/services", ("copilot_runtime.graphql", "copilot_runtime.agui", "agents")),
        ("conversations/selectors.py", ("copilot_runtime.graphql", "copilot_runtime.agui")),
        # The turn's storage writes what the engine hands it (spans arrive priced).
        (
            "conversations/store",
            (
                "agents",
                "copilot_runtime.engine",
                "copilot_runtime.tracing",
                "copilot_runtime.graphql",
                "copilot_runtime.agui",
                "copilot_runtime.adapters",
            ),
        ),
        # The guardrails read the protocol-neutral request, not a protocol's parser.
        ("copilot_runtime/guardrails", ("copilot_runtime.graphql", "copilot_runtime.agui")),
        # One v1 walk of the events: the wire encoder and the object pump subclass it, and
        # neither the walk nor the rules know GraphQL objects.
        ("copilot_runtime/graphql/v1_translation.py", ("copilot_runtime.graphql.types",)),
        ("copilot_runtime/graphql/v1_rules.py", ("copilot_runtime.graphql.types",)),
    ],
)
def test_a_layer_does_not_import_above_itself(folder: str, forbidden: tuple[str, ...]) -> None:
    if folder.endswith(".py"):
        path = ROOT / folder
        tree = ast.parse(path.read_text())
        names = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
        }
        bad = sorted(name for name in names if name.startswith(forbidden))
    else:
        bad = offenders(folder, forbidden)
    assert bad == []


async def test_without_the_agents_app_the_engine_runs_the_chat_engine_alone() -> None:
    host = ChatOnlyHost()
    await host.resolve("default")
    with pytest.raises(AgentNotFoundError):
        await host.resolve("researcher")
    with pytest.raises(AgentNotFoundError):
        host.check_runnable("researcher")
