"""Checks pyproject.toml's import-linter contracts over the real import graph, with imports
added (a JSON list of [importer, imported] pairs as the one argument); prints each contract's
id and whether it is kept, as JSON. Run by tests/test_layers.py in an interpreter of its own."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import grimp
from importlinter.configuration import configure
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.layers import LayersContract

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_TYPES: dict[str, Any] = {
    "layers": LayersContract,
    "acyclic_siblings": AcyclicSiblingsContract,
}


def kept(added: list[list[str]]) -> dict[str, bool]:
    linter = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    found: dict[str, bool] = {}
    for options in linter["contracts"]:
        # A contract's check may change the graph it is given: one graph each.
        graph = grimp.build_graph(*linter["root_packages"], cache_dir=None)
        for importer, imported in added:
            graph.add_import(importer=importer, imported=imported)
        own = {k: v for k, v in options.items() if k not in {"id", "name", "type"}}
        contract = CONTRACT_TYPES[options["type"]](
            name=options["id"], session_options=linter, contract_options=own
        )
        found[options["id"]] = contract.check(graph, verbose=False).kept
    return found


if __name__ == "__main__":
    # What ``lint-imports`` sets up before it checks a contract (its clock, its readers).
    configure()
    print(json.dumps(kept(json.loads(sys.argv[1]))))
