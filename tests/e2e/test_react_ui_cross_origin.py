"""The real CopilotKit React UI (v1 1.10.6 over GraphQL, v2 1.74 over AG-UI) in headless
Chromium, served from another origin than the runtime (the usual React dev server on one port
against the runtime on another): in development it works with no setting (loopback origins are
allowed while DEBUG is on); with DEBUG off the unlisted origin is refused, and the runtime's log
says which origin and which setting."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conversations.models import Message, Run, RunStatus
from tests.e2e.js_client import ensure_js_clients_installed
from tests.support.generate_e2e import finished_run, server_env, wait_for

if TYPE_CHECKING:
    from benchmarks.fake_upstream import FakeUpstream

pytestmark = pytest.mark.e2e

JS_ROOT = Path(__file__).resolve().parent / "js"
DRIVER = JS_ROOT / "browser" / "chat_ui.cjs"
CHROMIUM = Path("/usr/bin/chromium")
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><link rel="stylesheet" href="app.css"></head>
<body><div id="root"></div><script src="app.js"></script></body></html>
"""


def build_ui(version: str, out: Path) -> Path:
    """The UI bundled with esbuild (seconds), next to the page that loads it."""
    folder = JS_ROOT / f"react-{version}"
    subprocess.run(
        [
            str(folder / "node_modules" / ".bin" / "esbuild"),
            "src/app.jsx",
            "--bundle",
            f"--outdir={out}",
            '--define:process.env.NODE_ENV="production"',
            "--loader:.js=jsx",
            "--loader:.woff=file",
            "--loader:.woff2=file",
            "--loader:.ttf=file",
            "--log-level=error",
        ],
        cwd=folder,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (out / "index.html").write_text(PAGE)
    if not (out / "app.css").exists():
        (out / "app.css").write_text("")
    return out


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None  # the page's requests are the test's business, not its output


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Each UI bundled once for the module: esbuild's work is the same for both tests."""
    built: dict[str, Path] = {}

    def bundle(version: str) -> Path:
        if version not in built:
            ensure_js_clients_installed()
            built[version] = build_ui(version, tmp_path_factory.mktemp(f"ui-{version}"))
        return built[version]

    return bundle


@pytest.fixture
def page_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A static server on a port of its own: the page's origin differs from the runtime's."""
    root = tmp_path / "ui"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()


def chat(url: str, message: str, expect: str, timeout_ms: int = 20000) -> dict[str, Any]:
    assert CHROMIUM.exists(), "Debian's chromium is missing: scripts/test.sh installs it"
    node = shutil.which("node")
    assert node is not None
    completed = subprocess.run(
        [node, str(DRIVER)],
        cwd=DRIVER.parent,
        input=json.dumps(
            {"url": url, "message": message, "expect": expect, "timeoutMs": timeout_ms}
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_in_development_the_react_ui_on_another_origin_just_works(
    bundles: Callable[[str], Path],
    live_server_factory: Any,
    fake_upstream: FakeUpstream,
    page_server: tuple[str, Path],
    version: str,
) -> None:
    origin, root = page_server
    shutil.copytree(bundles(version), root, dirs_exist_ok=True)
    runtime = live_server_factory(env=server_env(fake_upstream.base_url, DEBUG="true"))

    result = chat(
        f"{origin}/index.html?runtime={runtime.url}/api/copilotkit",
        # The reply ("t0 t1 t2 t3") is not in the message itself, which the chat shows too.
        'FAKE: {"tokens": 4}',
        "t0 t1 t2 t3",
    )

    assert result["replied"], result
    assert origin.split(":")[-1] != runtime.url.split(":")[-1]  # really another origin
    calls = [r for r in result["requests"] if "/api/copilotkit" in r["url"]]
    # Every call the page made to the runtime was answered (a call the browser's CORS rules
    # block never gets a status)...
    assert calls and all(r.get("status") in (200, 204) for r in calls), calls
    # ... and none failed, except as the v1 client ends its streams: urql stops reading at the
    # part saying ``hasNext: false`` and cancels the body, which the browser reports as
    # aborted when the body's end had not been read yet.
    ends_its_own_streams = {"net::ERR_ABORTED"} if version == "v1" else set()
    assert all(r.get("failure") in {None, *ends_its_own_streams} for r in calls), calls
    # That cancel comes after the answer's end: every run the page started finished, and the
    # reply is stored.
    runs = wait_for(lambda: list(Run.objects.all()), what="the chat's run to be stored")
    assert all(finished_run(run.pk).status == RunStatus.SUCCEEDED for run in runs), runs
    assert Message.objects.filter(role="assistant", content="t0 t1 t2 t3").exists()


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_with_debug_off_an_unlisted_origin_is_refused_and_the_log_says_why(
    bundles: Callable[[str], Path],
    live_server_factory: Any,
    fake_upstream: FakeUpstream,
    page_server: tuple[str, Path],
    version: str,
) -> None:
    origin, root = page_server
    shutil.copytree(bundles(version), root, dirs_exist_ok=True)
    runtime = live_server_factory(env=server_env(fake_upstream.base_url, DEBUG="false"))

    result = chat(
        f"{origin}/index.html?runtime={runtime.url}/api/copilotkit",
        'FAKE: {"tokens": 4}',
        "t0 t1 t2 t3",
        timeout_ms=5000,
    )

    assert not result["replied"]
    assert fake_upstream.requests() == []  # no run reached the model
    log = runtime.stdout_text() + runtime.stderr_text()
    assert "refused the CORS preflight" in log and origin in log
    assert "CORS_ALLOWED_ORIGINS" in log
