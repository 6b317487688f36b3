"""The TypeScript runtimes the benchmark measures beside the project, installed from npm.

- ``v1/``: ``@copilotkit/runtime`` 1.10.6 (GraphQL) with the OpenAI adapter (``openai`` 4.x);
- ``v2/``: ``@copilotkit/runtime`` 1.75.0 (AG-UI) with one ``BuiltInAgent`` on ``@ai-sdk/openai``.

Each folder holds a committed ``package.json`` and ``package-lock.json`` and a tiny server
(``node server.* <port> <fake upstream /v1 URL>``, ``GET /healthz``). ``ensure_installed`` runs
``npm ci`` only when ``node_modules`` is missing or older than the lock file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parent
V1 = "v1"
V2 = "v2"
_SERVERS = {V1: "server.cjs", V2: "server.mjs"}
PEER_VERSIONS = {V1: "@copilotkit/runtime 1.10.6", V2: "@copilotkit/runtime 1.75.0"}


class PeersUnavailable(RuntimeError):
    """Node or npm is missing, or the install failed: the project is measured alone."""


def node_binary() -> str | None:
    return shutil.which("node")


def needs_install(folder: Path) -> bool:
    """Whether ``npm ci`` must run: no finished install, or one older than the lock file."""
    lock = folder / "package-lock.json"
    # npm writes node_modules/.package-lock.json last: it marks a finished install.
    marker = folder / "node_modules" / ".package-lock.json"
    return not marker.exists() or lock.stat().st_mtime > marker.stat().st_mtime


def ensure_installed(kind: str) -> Path:
    """The peer's folder, installed; raises PeersUnavailable with the reason."""
    folder = PEERS_DIR / kind
    if node_binary() is None or shutil.which("npm") is None:
        raise PeersUnavailable("node/npm not found: the TypeScript runtimes cannot be measured")
    if needs_install(folder):
        # --legacy-peer-deps: the runtimes declare optional peers (LangChain, Anthropic...)
        # that these servers never load.
        command = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"]
        command += ["--legacy-peer-deps", "--loglevel=error"]
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise PeersUnavailable(f"npm ci failed in {folder}:\n{done.stderr[-2000:]}")
    return folder


def peer_command(kind: str, *, port: int, upstream_base_url: str) -> list[str]:
    """The command serving peer ``kind`` on ``port`` against the OpenAI-style ``/v1`` URL."""
    node = node_binary()
    if node is None:
        raise PeersUnavailable("node not found")
    server = PEERS_DIR / kind / _SERVERS[kind]
    return [node, str(server), str(port), upstream_base_url]
